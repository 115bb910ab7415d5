//! IOR's hand-written JSON, byte for byte.
//!
//! What: IOR 4.1 prints JSON with `fprintf` through a small state machine
//! (`PrintKeyVal`, `PrintStartSection`, `PrintNamedSectionStart`, `PrintEndSection`,
//! `PrintArrayEnd` in ior-output.c): an indent level, a "comma pending" flag printed as
//! `", \n"` before the next token, numbers as `%.4f` and integers as `%lld`. The output is
//! valid JSON with IOR's idiosyncratic layout (`"}\n, \n"`, the `Path`/`Capacity` line
//! glued after `StartTime`). [`JsonWriter`] is that state machine, so the layout matches
//! the sample in `ior-samples/` character for character.
//!
//! One deliberate difference: strings are JSON-escaped (IOR prints them raw, so a path
//! with a quote would break its JSON); for ordinary strings the bytes are identical.
//!
//! Not here: which keys are printed in which order — that is the report's content,
//! decided by `output::Printer`.

use std::io::{self, Write};

/// IOR's JSON printer state.
#[derive(Debug, Default)]
pub struct JsonWriter {
    indent: i32,
    need_next_token: bool,
}

impl JsonWriter {
    fn print_indent(&self, w: &mut dyn Write) -> io::Result<()> {
        for _ in 0..self.indent.max(0) {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    /// IOR's `PrintNextToken`: the pending comma, then the indent.
    fn next_token(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if self.need_next_token {
            self.need_next_token = false;
            w.write_all(b", \n")?;
        }
        self.print_indent(w)
    }

    /// `"key": "value"`.
    pub fn key_str(&mut self, w: &mut dyn Write, key: &str, value: &str) -> io::Result<()> {
        self.key_raw(w, key, &quote(value))
    }

    /// `"key": 42`.
    pub fn key_int(&mut self, w: &mut dyn Write, key: &str, value: i64) -> io::Result<()> {
        self.key_raw(w, key, &value.to_string())
    }

    /// `"key": 1.2345` (`%.4f`).
    pub fn key_f64(&mut self, w: &mut dyn Write, key: &str, value: f64) -> io::Result<()> {
        self.key_raw(w, key, &format!("{value:.4}"))
    }

    /// `"key": <raw JSON>`.
    pub fn key_raw(&mut self, w: &mut dyn Write, key: &str, raw: &str) -> io::Result<()> {
        self.next_token(w)?;
        self.need_next_token = true;
        write!(w, "{}: {raw}", quote(key))
    }

    /// Raw text after the last value, before the pending comma (IOR's `Path` line).
    pub fn raw(&mut self, w: &mut dyn Write, text: &str) -> io::Result<()> {
        w.write_all(text.as_bytes())
    }

    /// `PrintStartSection`: an anonymous object.
    pub fn start_section(&mut self, w: &mut dyn Write) -> io::Result<()> {
        self.next_token(w)?;
        self.need_next_token = false;
        self.print_indent(w)?;
        w.write_all(b"{\n")?;
        self.indent += 1;
        Ok(())
    }

    /// `PrintNamedSectionStart`: `"key": {`.
    pub fn named_section(&mut self, w: &mut dyn Write, key: &str) -> io::Result<()> {
        self.next_token(w)?;
        self.need_next_token = false;
        self.indent += 1;
        writeln!(w, "{}: {{", quote(key))
    }

    /// `PrintNamedArrayStart`: `"key": [`, indented one level more.
    pub fn named_array(&mut self, w: &mut dyn Write, key: &str) -> io::Result<()> {
        self.next_token(w)?;
        self.need_next_token = false;
        self.indent += 1;
        writeln!(w, "{}: [", quote(key))
    }

    /// `PrintArrayNamedStart`: `"key": [` without changing the indent (the `tests` array).
    pub fn array_named_start(&mut self, w: &mut dyn Write, key: &str) -> io::Result<()> {
        self.next_token(w)?;
        self.need_next_token = false;
        writeln!(w, "{}: [", quote(key))
    }

    /// `PrintEndSection`: `}`.
    pub fn end_section(&mut self, w: &mut dyn Write) -> io::Result<()> {
        self.indent -= 1;
        w.write_all(b"\n")?;
        self.print_indent(w)?;
        w.write_all(b"}\n")?;
        self.need_next_token = true;
        Ok(())
    }

    /// `PrintArrayEnd`: `]`.
    pub fn array_end(&mut self, w: &mut dyn Write) -> io::Result<()> {
        self.indent -= 1;
        w.write_all(b"]\n")?;
        self.need_next_token = true;
        Ok(())
    }

    /// A backend's object, in the same style: nested objects as sections, integers as
    /// `%lld`, other numbers as `%.4f`, booleans as 0/1, arrays as compact JSON.
    pub fn value_section(
        &mut self,
        w: &mut dyn Write,
        key: &str,
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> io::Result<()> {
        use serde_json::Value;
        self.named_section(w, key)?;
        for (name, value) in map {
            match value {
                Value::Object(inner) => self.value_section(w, name, inner)?,
                Value::String(text) => self.key_str(w, name, text)?,
                Value::Bool(flag) => self.key_int(w, name, i64::from(*flag))?,
                Value::Number(n) if n.is_i64() || n.is_u64() => self.key_raw(w, name, &n.to_string())?,
                Value::Number(n) => self.key_f64(w, name, n.as_f64().unwrap_or(f64::NAN))?,
                other => self.key_raw(w, name, &other.to_string())?,
            }
        }
        self.end_section(w)
    }
}

/// A JSON string literal.
pub fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_iors_layout() {
        let mut w = JsonWriter::default();
        let mut out = Vec::new();
        w.start_section(&mut out).unwrap();
        w.key_str(&mut out, "Version", "4.1.0+dev").unwrap();
        w.array_named_start(&mut out, "tests").unwrap();
        w.start_section(&mut out).unwrap();
        w.key_int(&mut out, "TestID", 0).unwrap();
        w.named_section(&mut out, "Options").unwrap();
        w.key_str(&mut out, "api", "POSIX").unwrap();
        w.end_section(&mut out).unwrap();
        w.named_array(&mut out, "Results").unwrap();
        w.start_section(&mut out).unwrap();
        w.key_f64(&mut out, "bwMiB", 625.998).unwrap();
        w.end_section(&mut out).unwrap();
        w.array_end(&mut out).unwrap();
        w.end_section(&mut out).unwrap();
        w.array_end(&mut out).unwrap();
        w.key_str(&mut out, "Finished", "now").unwrap();
        w.end_section(&mut out).unwrap();
        let expected = "{\n  \"Version\": \"4.1.0+dev\", \n  \"tests\": [\n    {\n    \"TestID\": 0, \n    \"Options\": {\n      \"api\": \"POSIX\"\n    }\n, \n    \"Results\": [\n            {\n        \"bwMiB\": 625.9980\n      }\n]\n\n  }\n]\n, \n\"Finished\": \"now\"\n}\n";
        assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
        serde_json::from_slice::<serde_json::Value>(&out).unwrap();
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("/scratch/ior/testfile"), "\"/scratch/ior/testfile\"");
    }
}
