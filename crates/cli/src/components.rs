//! `lfs setstripe -E END [OPTIONS] -E END [OPTIONS] ...`: the striping
//! options of a composite layout, grouped by the `-E` before them.
//!
//! clap checks every option's value; it cannot say which `-E` an option
//! followed, so the command line is walked again here, in order, for
//! setstripe's own options alone.

use crate::fs::{parse_ost_list, parse_size, stripe_pool};
use anyhow::{bail, Context, Result};
use lanefs_mds::{ComponentSpec, StripeSpec};

/// setstripe's options that take a value: `(short, long, what)`.
const VALUED: [(char, &str); 7] = [
    ('E', "component-end"),
    ('c', "stripe-count"),
    ('C', "overstripe-count"),
    ('S', "stripe-size"),
    ('i', "stripe-index"),
    ('p', "pool"),
    ('o', "ost"),
];

/// The components of the setstripe command in `args` (a program's whole
/// command line: the options after its `setstripe`), in order.
pub fn component_specs(args: &[String]) -> Result<Vec<ComponentSpec>> {
    let at = args.iter().position(|arg| arg == "setstripe").context("no setstripe on the command line")?;
    let mut components: Vec<ComponentSpec> = Vec::new();
    let mut tokens = args[at + 1..].iter();
    while let Some(token) = tokens.next() {
        let Some((option, attached)) = option_of(token) else { continue };
        let value = match attached {
            Some(value) => value.to_string(),
            None => tokens.next().with_context(|| format!("setstripe {token}: give it a value"))?.clone(),
        };
        if option == 'E' {
            components.push(ComponentSpec { end: component_end(&value)?, stripe: StripeSpec::default() });
            continue;
        }
        let Some(component) = components.last_mut() else {
            bail!("setstripe -{option} before the first -E: give each component's options after its -E");
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
    fn options_go_to_the_component_of_the_e_before_them() {
        let line = "lanefs --mds x setstripe -E 64M -c 1 -S1m -E 1G --stripe-count=2 -p fast -E -1 -C -2 -o 0,2 /pfl";
        let parts = component_specs(&args(line)).unwrap();
        let ends: Vec<u64> = parts.iter().map(|p| p.end).collect();
        assert_eq!(ends, [64 << 20, 1 << 30, u64::MAX]);
        assert_eq!((parts[0].stripe.count, parts[0].stripe.size), (Some(1), Some(1 << 20)));
        assert_eq!(parts[1].stripe.count, Some(2));
        assert_eq!(parts[1].stripe.pool.map(|p| p.as_str().to_string()).as_deref(), Some("fast"));
        assert_eq!((parts[2].stripe.count, parts[2].stripe.overstripe), (Some(-2), true));
        assert_eq!(parts[2].stripe.osts.as_deref(), Some(&[0, 2][..]));
        assert_eq!(component_specs(&args("lanefs setstripe --component-end=eof -c 4 f")).unwrap()[0].end, u64::MAX);
    }

    #[test]
    fn what_cannot_be_grouped_is_refused_by_name() {
        let early = component_specs(&args("lanefs setstripe -c 2 -E -1 f")).unwrap_err().to_string();
        assert!(early.contains("-c before the first -E"), "{early}");
        let twice = component_specs(&args("lanefs setstripe -E -1 -c 2 -c 3 f")).unwrap_err().to_string();
        assert!(twice.contains("-c given twice for one component"), "{twice}");
        let end = component_specs(&args("lanefs setstripe -E 1x f")).unwrap_err().to_string();
        assert!(end.contains("-E 1x"), "{end}");
    }
}
