#!/bin/sh
# lanefs on several hosts, on one machine: network namespaces stand in for
# hosts. One namespace runs the MDS and the OSS (TCP, with a cluster key);
# two others run the MPI ranks, which mpirun launches into them through an
# rsh agent that enters the namespace (each with a host name of its own).
# Every namespace has a veth pair to one bridge. Then it runs, across the
# two rank hosts:
#
#   mpirun -np 4 lanefs ior -a MPIIO -c -w -r -W -R -C -e ... --cluster MDS --key admin.pem
#
# (collective MPI-IO with lockahead; -C makes each rank read back data
# another host wrote) and tears everything down, whatever happened.
#
#   bench/netns.sh [LANEFS]        (root; needs ip, unshare and Open MPI;
#                                   LANEFS built with MPI: make build)
#
# Exits with the status of the IOR run; its report goes to stdout.
set -eu

LANEFS=$(realpath "${1:-target/release/lanefs}")
id=$$
net=10.78.$((id % 250))
srv=lfs${id}s; h1=lfs${id}a; h2=lfs${id}b; bridge=lfsbr$((id % 100000))
work=$(mktemp -d "${TMPDIR:-/tmp}/lanefs-netns-XXXXXX")

cleanup() {
    [ -n "${servers:-}" ] && kill $servers 2>/dev/null || true
    for ns in "$srv" "$h1" "$h2"; do ip netns del "$ns" 2>/dev/null || true; done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip link add "$bridge" type bridge
ip addr add "$net.1/24" dev "$bridge"
ip link set "$bridge" up
n=10
for ns in "$srv" "$h1" "$h2"; do
    ip netns add "$ns"
    ip link add "v$ns" type veth peer name eth0 netns "$ns"
    ip link set "v$ns" master "$bridge" up
    ip -n "$ns" addr add "$net.$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    n=$((n + 1))
done

# The servers, on the first host.
"$LANEFS" key new "$work/keys" >/dev/null
ip netns exec "$srv" "$LANEFS" mds --data "$work/mds" --osts 4 --listen "$net.10:9400" \
    --key "$work/keys/server.pem" >"$work/mds.log" 2>&1 &
servers=$!
sleep 1
ip netns exec "$srv" "$LANEFS" oss --data "$work/oss" --ost 0,1,2,3 --listen "$net.10:9401" \
    --mds "$net.10:9400" --key "$work/keys/server.pem" >"$work/oss.log" 2>&1 &
servers="$servers $!"
sleep 1

# mpirun's rsh agent: host H is namespace H, with host name H.
cat >"$work/rsh" <<'EOF'
#!/bin/sh
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; $*"
EOF
chmod +x "$work/rsh"
printf '%s slots=2\n%s slots=2\n' "$h1" "$h2" >"$work/hosts"

MPICH_MPIIO_HINTS='*:striping_factor=4:striping_unit=262144:cray_cb_write_lock_mode=2' \
MPICH_MPIIO_STATS=1 MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY=1 \
mpirun --allow-run-as-root --oversubscribe --hostfile "$work/hosts" -np 4 \
    --mca plm_rsh_agent "$work/rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" --mca btl self,vader,tcp \
    -x MPICH_MPIIO_HINTS -x MPICH_MPIIO_STATS -x MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY \
    "$LANEFS" ior -a MPIIO -c -w -r -W -R -C -e -b 1m -t 256k -s 4 \
    --cluster "$net.10:9400" --key "$work/keys/admin.pem"
