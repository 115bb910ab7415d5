//! `lfs setstripe`'s striping options (which `lfs migrate` takes too) and
//! their values: OST lists (`-o`), pools (`-p`), and a composite layout's
//! options (`-E END [OPTIONS] -E END [OPTIONS] ...`), grouped by the `-E`
//! before them.
//!
//! clap checks every option's value; it cannot say which `-E` an option
//! followed, so the command line is walked again here, in order, for
//! setstripe's own options alone.

use anyhow::{bail, Context, Result};
use clap::Args;
use lanefs_ior::parse_size;
use lanefs_proto::{ComponentSpec, PoolName, StripeSpec};

/// `lfs setstripe`'s striping options, which `lfs migrate` takes too.
#[derive(Args, Debug)]
pub struct StripeArgs {
    /// Stripe count: number of OSTs (-1 = all, 0 = inherit).
    #[arg(short = 'c', long = "stripe-count", allow_hyphen_values = true, action = clap::ArgAction::Append)]
    count: Vec<i64>,
    /// Stripe size, a multiple of 64 KiB, with k/m/g suffixes (0 = inherit).
    #[arg(short = 'S', long = "stripe-size", value_parser = parse_size, action = clap::ArgAction::Append)]
    size: Vec<u64>,
    /// Index of the first OST (-1 = any).
    #[arg(short = 'i', long = "stripe-index", allow_hyphen_values = true, action = clap::ArgAction::Append)]
    index: Vec<i64>,
    /// Overstripe count: stripes, more than one per OST where they
    /// outnumber the OSTs (-N = N per OST, up to -32; 0 = inherit).
    #[arg(short = 'C', long = "overstripe-count", allow_hyphen_values = true, action = clap::ArgAction::Append)]
    overstripe_count: Vec<i64>,
    /// The OSTs of a new file's stripes, in order: indices and ranges,
    /// e.g. 1,2-4,7 (repeat -o for more; an OST listed twice holds two
    /// stripes).
    #[arg(short = 'o', long = "ost", visible_alias = "ost-list", action = clap::ArgAction::Append)]
    ost: Vec<String>,
    /// OST pool (NAME or lanefs.NAME) the objects come from; '', none
    /// or inherit: the inherited pool.
    #[arg(short = 'p', long = "pool", action = clap::ArgAction::Append)]
    pool: Vec<String>,
    /// A composite layout (PFL): each -E END (a size, or -1 for the end
    /// of the file) starts a component, whose -c, -C, -S, -i, -o and -p
    /// follow it; the last ends at -1.
    #[arg(short = 'E', long = "component-end", allow_hyphen_values = true, action = clap::ArgAction::Append)]
    component_end: Vec<String>,
}

impl StripeArgs {
    /// The striping asked for (every field unset if none), by the
    /// `command` (setstripe, migrate) on this program's command line.
    pub fn spec(&self, command: &str) -> Result<StripeSpec> {
        if !self.component_end.is_empty() {
            let args: Vec<String> = std::env::args().collect();
            let components = component_specs(&args, command)?;
            return Ok(StripeSpec { components: Some(components), ..StripeSpec::default() });
        }
        let StripeArgs { count, size, index, overstripe_count, ost, pool, .. } = self;
        // Each once (several belong to the components of a composite
        // layout, handled above).
        if count.len() + overstripe_count.len() > 1 || size.len() > 1 || index.len() > 1 || pool.len() > 1 {
            bail!("{command}: give one of -c and -C, and -S, -i and -p, once each (one plain layout)");
        }
        let osts = match ost.is_empty() {
            true => None,
            false => Some(ost.iter().map(|list| parse_ost_list(list)).collect::<Result<Vec<_>>>()?.concat()),
        };
        Ok(StripeSpec {
            count: count.first().or(overstripe_count.first()).copied(),
            overstripe: !overstripe_count.is_empty(),
            size: size.first().copied(),
            start_ost: index.first().copied(),
            pool: stripe_pool(pool.first().map(String::as_str))?,
            osts,
            components: None,
        })
    }
}

/// `-o`'s OST list, as `lfs setstripe` reads it: indices (decimal, or hex
/// with `0x`) and ranges `A-B`, separated by commas, in order.
pub fn parse_ost_list(list: &str) -> Result<Vec<u32>> {
    let index = |text: &str| -> Result<u32> {
        let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => text.parse(),
        };
        parsed.map_err(|_| {
            anyhow::anyhow!("-o {list}: {text:?} is not an OST index: give indices and ranges, e.g. -o 1,2-4,7")
        })
    };
    let mut osts = Vec::new();
    for item in list.split(',') {
        match item.split_once('-') {
            None => osts.push(index(item)?),
            Some((first, last)) => {
                let (first, last) = (index(first)?, index(last)?);
                if first > last {
                    bail!("-o {list}: the range {item} runs backwards: write it {last}-{first}");
                }
                if osts.len() + (last - first) as usize >= lanefs_core::layout::STRIPE_COUNT_MAX as usize {
                    bail!("-o {list}: more than {} OSTs", lanefs_core::layout::STRIPE_COUNT_MAX);
                }
                osts.extend(first..=last);
            }
        }
    }
    Ok(osts)
}

/// `-p`'s pool, as `lfs setstripe` reads it: `''`, `none` and `inherit`
/// ask for the inherited pool (no pool of its own); `ignore` (Lustre's
/// "no pool, whatever is inherited") is refused: lanefs has no way to opt
/// out of an inherited pool but `-p` with another one.
pub fn stripe_pool(pool: Option<&str>) -> Result<Option<PoolName>> {
    match pool {
        None | Some("" | "none" | "inherit") => Ok(None),
        Some("ignore") => bail!(
            "-p ignore is not supported: lanefs has no way to opt out of an inherited pool; \
             give another pool, or remove the directory's pool (lanefs setstripe -d, or -p none)"
        ),
        Some(name) => Ok(Some(PoolName::parse(name)?)),
    }
}

/// setstripe's options that take a value: `(short, long)`.
const VALUED: [(char, &str); 7] = [
    ('E', "component-end"),
    ('c', "stripe-count"),
    ('C', "overstripe-count"),
    ('S', "stripe-size"),
    ('i', "stripe-index"),
    ('p', "pool"),
    ('o', "ost"),
];

/// The components of the `command` (setstripe, migrate) in `args` (a
/// program's whole command line: the options after its `command`), in
/// order.
pub fn component_specs(args: &[String], command: &str) -> Result<Vec<ComponentSpec>> {
    let at = args.iter().position(|arg| arg == command).with_context(|| format!("no {command} on the command line"))?;
    let mut components: Vec<ComponentSpec> = Vec::new();
    let mut tokens = args[at + 1..].iter();
    while let Some(token) = tokens.next() {
        let Some((option, attached)) = option_of(token) else { continue };
        let value = match attached {
            Some(value) => value.to_string(),
            None => tokens.next().with_context(|| format!("{command} {token}: give it a value"))?.clone(),
        };
        if option == 'E' {
            components.push(ComponentSpec { end: component_end(&value)?, stripe: StripeSpec::default() });
            continue;
        }
        let Some(component) = components.last_mut() else {
            bail!("{command} -{option} before the first -E: give each component's options after its -E");
        };
        set(&mut component.stripe, option, &value)?;
    }
    Ok(components)
}

/// `(short option, value attached to it)` of an option token among
/// [`VALUED`]; `None` for anything else (the path, `-d`, `--`).
fn option_of(token: &str) -> Option<(char, Option<&str>)> {
    if let Some(long) = token.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let name = if name == "ost-list" { "ost" } else { name };
        return VALUED.iter().find(|(_, long)| *long == name).map(|(short, _)| (*short, value));
    }
    let mut chars = token.strip_prefix('-')?.chars();
    let short = chars.next()?;
    let rest = chars.as_str();
    VALUED.iter().any(|(s, _)| *s == short).then_some((short, (!rest.is_empty()).then_some(rest)))
}

/// `-E`'s value: a size (k/m/g), or `-1`/`eof` for the end of the file.
fn component_end(value: &str) -> Result<u64> {
    match value {
        "-1" | "eof" | "EOF" => Ok(u64::MAX),
        _ => parse_size(value).map_err(|e| anyhow::anyhow!("-E {value}: {e}; or -1 (eof) for the end of the file")),
    }
}

/// One component's option.
fn set(stripe: &mut StripeSpec, option: char, value: &str) -> Result<()> {
    let number = |value: &str| -> Result<i64> {
        value.parse().map_err(|_| anyhow::anyhow!("setstripe -{option} {value}: not a number"))
    };
    let once = |given: bool| -> Result<()> {
        match given {
            true => bail!("setstripe: -{option} given twice for one component (-E)"),
            false => Ok(()),
        }
    };
    match option {
        'c' | 'C' => {
            once(stripe.count.is_some())?;
            stripe.count = Some(number(value)?);
            stripe.overstripe = option == 'C';
        }
        'S' => {
            once(stripe.size.is_some())?;
            stripe.size = Some(parse_size(value).map_err(|e| anyhow::anyhow!("-S {value}: {e}"))?);
        }
        'i' => {
            once(stripe.start_ost.is_some())?;
            stripe.start_ost = Some(number(value)?);
        }
        'p' => {
            once(stripe.pool.is_some())?;
            stripe.pool = stripe_pool(Some(value))?;
        }
        'o' => stripe.osts.get_or_insert_with(Vec::new).extend(parse_ost_list(value)?),
        _ => unreachable!("only setstripe's valued options reach here"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn ost_lists_read_as_lfs_reads_them() {
        assert_eq!(parse_ost_list("1,2-4,7").unwrap(), [1, 2, 3, 4, 7]);
        assert_eq!(parse_ost_list("0x3,1,1").unwrap(), [3, 1, 1], "order kept, repeats overstripe");
        for (bad, says) in [
            ("1,x", "\"x\" is not an OST index"),
            ("4-2", "runs backwards"),
            ("", "\"\" is not"),
            ("-1", "\"\" is not"),
        ] {
            let error = parse_ost_list(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
        assert!(parse_ost_list("0-4000").unwrap_err().to_string().contains("more than 2000 OSTs"));
    }

    #[test]
    fn options_go_to_the_component_of_the_e_before_them() {
        let line = "lanefs --mds x setstripe -E 64M -c 1 -S1m -E 1G --stripe-count=2 -p fast -E -1 -C -2 -o 0,2 /pfl";
        let parts = component_specs(&args(line), "setstripe").unwrap();
        let ends: Vec<u64> = parts.iter().map(|p| p.end).collect();
        assert_eq!(ends, [64 << 20, 1 << 30, u64::MAX]);
        assert_eq!((parts[0].stripe.count, parts[0].stripe.size), (Some(1), Some(1 << 20)));
        assert_eq!(parts[1].stripe.count, Some(2));
        assert_eq!(parts[1].stripe.pool.map(|p| p.as_str().to_string()).as_deref(), Some("fast"));
        assert_eq!((parts[2].stripe.count, parts[2].stripe.overstripe), (Some(-2), true));
        assert_eq!(parts[2].stripe.osts.as_deref(), Some(&[0, 2][..]));
        assert_eq!(
            component_specs(&args("lanefs setstripe --component-end=eof -c 4 f"), "setstripe").unwrap()[0].end,
            u64::MAX
        );
    }

    #[test]
    fn what_cannot_be_grouped_is_refused_by_name() {
        let early = component_specs(&args("lanefs setstripe -c 2 -E -1 f"), "setstripe").unwrap_err().to_string();
        assert!(early.contains("-c before the first -E"), "{early}");
        let twice = component_specs(&args("lanefs setstripe -E -1 -c 2 -c 3 f"), "setstripe").unwrap_err().to_string();
        assert!(twice.contains("-c given twice for one component"), "{twice}");
        let end = component_specs(&args("lanefs setstripe -E 1x f"), "setstripe").unwrap_err().to_string();
        assert!(end.contains("-E 1x"), "{end}");
    }
}
