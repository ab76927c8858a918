//! Chunked reading of a state document.
//!
//! The input is read in chunks of [`CHUNK`] bytes. The top level of the document is
//! walked by a small scanner that only finds where each value ends (strings, nesting);
//! each element of `resources` is then deserialized with serde_json, borrowed from the
//! buffer, turned into nodes and dropped. Memory stays at one chunk plus the largest
//! single resource block, whatever the size of the state; errors still carry the line
//! and column in the whole file.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::error::{Error, Result};
use crate::parse::{Loader, RawResource};
use crate::sensitive::Outputs;

/// Bytes read from the source at a time.
const CHUNK: usize = 4 << 20;

/// Number of `\n` bytes in `bytes`, counted in byte lanes the compiler vectorizes.
fn count_newlines(bytes: &[u8]) -> usize {
    const LANES: usize = 64;
    let mut total = 0usize;
    // At most 255 blocks per round, so a lane's u8 counter cannot overflow.
    for round in bytes.chunks(255 * LANES) {
        let mut lanes = [0u8; LANES];
        let blocks = round.chunks_exact(LANES);
        let rest = blocks.remainder();
        for block in blocks {
            for (lane, &b) in lanes.iter_mut().zip(block) {
                *lane += u8::from(b == b'\n');
            }
        }
        total += lanes.iter().map(|&n| usize::from(n)).sum::<usize>();
        total += rest.iter().filter(|&&b| b == b'\n').count();
    }
    total
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// A window over the input with a cursor and line/column bookkeeping.
pub(crate) struct Reader<'o, R> {
    origin: &'o str,
    path: Option<&'o Path>,
    src: R,
    /// Buffer size to aim for: [`CHUNK`], or less for a small input.
    cap: usize,
    /// Buffer; `buf[..end]` holds input, `buf[pos..end]` the unconsumed part.
    buf: Vec<u8>,
    end: usize,
    pos: usize,
    eof: bool,
    /// 1-based line of `buf[0]`.
    base_line: usize,
    /// 0-based byte column of `buf[0]`.
    base_col: usize,
}

impl<'o, R: Read> Reader<'o, R> {
    /// A reader of `src`; `size_hint` (the input's length, when known) keeps the
    /// buffer small for small inputs.
    pub(crate) fn new(
        origin: &'o str,
        path: Option<&'o Path>,
        src: R,
        size_hint: Option<u64>,
    ) -> Self {
        let cap = size_hint
            .and_then(|n| usize::try_from(n.saturating_add(1)).ok())
            .map_or(CHUNK, |n| n.clamp(64, CHUNK));
        Self {
            cap,
            origin,
            path,
            src,
            buf: Vec::new(),
            end: 0,
            pos: 0,
            eof: false,
            base_line: 1,
            base_col: 0,
        }
    }

    /// Drops consumed bytes and reads more input (up to [`CHUNK`] bytes). False at
    /// the end of input.
    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            let consumed = &self.buf[..self.pos];
            let newlines = count_newlines(consumed);
            match memchr::memrchr(b'\n', consumed) {
                Some(last) => {
                    self.base_line += newlines;
                    self.base_col = consumed.len() - last - 1;
                }
                None => self.base_col += consumed.len(),
            }
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        // Grow only when the unconsumed part fills the buffer (one value larger than
        // everything read so far); the zeroing of `resize` is paid once per growth.
        if self.buf.len() - self.end < self.cap / 2 {
            let grown = (self.buf.len() * 2).max(self.cap);
            self.buf.resize(grown, 0);
        }
        let room = (self.buf.len() - self.end).min(CHUNK);
        let n = loop {
            match self.src.read(&mut self.buf[self.end..self.end + room]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(match self.path {
                        Some(path) => Error::Read {
                            path: path.to_owned(),
                            source,
                        },
                        None => Error::not_a_state(self.origin, format!("read error: {source}")),
                    });
                }
            }
        };
        self.end += n;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// 1-based line and column of `buf[at]`.
    fn line_col(&self, at: usize) -> (usize, usize) {
        let before = &self.buf[..at.min(self.end)];
        let newlines = count_newlines(before);
        match memchr::memrchr(b'\n', before) {
            Some(last) => (self.base_line + newlines, before.len() - last),
            None => (self.base_line, self.base_col + before.len() + 1),
        }
    }

    /// A syntax error at `buf[at]`.
    fn syntax(&self, at: usize, what: &str) -> Error {
        let (line, column) = self.line_col(at);
        let reason = if at >= self.end && self.eof {
            if line == 1 && column == 1 {
                "the file is empty".to_owned()
            } else {
                format!(
                    "the JSON ends early at line {line}, column {column} (truncated file?): {what}"
                )
            }
        } else {
            format!("invalid JSON at line {line}, column {column}: {what}")
        };
        Error::not_a_state(self.origin, reason)
    }

    /// Skips white space; the next byte, or `None` at the end of input.
    fn peek(&mut self) -> Result<Option<u8>> {
        loop {
            while let Some(&b) = self.buf[..self.end].get(self.pos) {
                if !is_ws(b) {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Consumes `byte` after white space, or fails naming `what` was expected.
    fn expect(&mut self, byte: u8, what: &str) -> Result<()> {
        if self.peek()? == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(self.pos, what))
        }
    }

    /// Index (exclusive) where the JSON value starting at `pos` ends, reading more
    /// input as needed. Only finds the extent; serde_json validates the value.
    ///
    /// Containers are measured by counting their own kind of bracket outside strings
    /// (an object's `[`/`]` balance inside it anyway), which lets `memchr` jump over
    /// everything else.
    fn value_end(&mut self) -> Result<usize> {
        if self.pos >= self.end && !self.fill()? {
            return Err(self.syntax(self.end, "unexpected end of input"));
        }
        let (open, close) = match self.buf[self.pos] {
            b'{' => (b'{', b'}'),
            b'[' => (b'[', b']'),
            b'"' => (0, 0),
            _ => return self.scalar_end(),
        };
        let mut i = self.pos;
        let mut depth = 0usize;
        let mut in_str = false;
        loop {
            if i >= self.end {
                let rel = i - self.pos;
                if !self.fill()? {
                    return Err(self.syntax(self.end, "unexpected end of input"));
                }
                i = self.pos + rel;
                continue;
            }
            if in_str {
                match memchr::memchr2(b'"', b'\\', &self.buf[i..self.end]) {
                    Some(k) if self.buf[i + k] == b'\\' => i += k + 2,
                    Some(k) => {
                        i += k + 1;
                        in_str = false;
                        if depth == 0 {
                            return Ok(i); // a string value
                        }
                    }
                    None => i = self.end,
                }
                continue;
            }
            match memchr::memchr3(b'"', open, close, &self.buf[i..self.end]) {
                None => i = self.end,
                Some(k) => {
                    i += k;
                    let b = self.buf[i];
                    i += 1;
                    if b == b'"' {
                        in_str = true;
                    } else if b == open {
                        depth += 1;
                    } else {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Ok(i);
                        }
                    }
                }
            }
        }
    }

    /// End of a number, `true`, `false` or `null` at `pos`.
    fn scalar_end(&mut self) -> Result<usize> {
        let mut i = self.pos;
        loop {
            while let Some(&b) = self.buf[..self.end].get(i) {
                if matches!(b, b',' | b'}' | b']') || is_ws(b) {
                    return Ok(i);
                }
                i += 1;
            }
            let rel = i - self.pos;
            if !self.fill()? {
                return Ok(self.end); // serde_json judges what is there
            }
            i = self.pos + rel;
        }
    }

    /// Deserializes `buf[start..end]`, mapping errors to positions in the file.
    fn parse<'s, T: Deserialize<'s>>(&'s self, start: usize, end: usize) -> Result<T> {
        let bytes = &self.buf[start..end];
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let (line, column) = self.line_col(start + e.valid_up_to());
            Error::not_a_state(
                self.origin,
                format!(
                    "the file is not UTF-8 text (invalid byte at line {line}, column {column})"
                ),
            )
        })?;
        serde_json::from_str(text).map_err(|e| self.json_error(start, &e))
    }

    /// A serde_json error of the value starting at `buf[start]`, with its position in
    /// the whole file.
    fn json_error(&self, start: usize, e: &serde_json::Error) -> Error {
        let (line0, col0) = self.line_col(start);
        let line = line0 + e.line().saturating_sub(1);
        let column = if e.line() <= 1 {
            col0 + e.column().saturating_sub(1)
        } else {
            e.column()
        };
        Error::from_json_at(self.origin, e, line, column)
    }

    /// Reads the `outputs` object at the cursor into the loader's sensitive values
    /// (only called when they are collected).
    fn outputs(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        self.peek()?;
        let end = self.value_end()?;
        if end == self.pos {
            return Err(self.syntax(self.pos, "expected a value"));
        }
        let outputs: Option<Outputs<'_>> = self.parse(self.pos, end)?;
        if let (Some(outputs), Some(found)) = (outputs, loader.secrets.as_mut())
            && let Err(e) = found.outputs(&outputs)
        {
            return Err(self.json_error(self.pos, &e));
        }
        self.pos = end;
        Ok(())
    }

    /// Parses the value at the cursor and moves past it.
    fn next_value<T: for<'s> Deserialize<'s>>(&mut self) -> Result<T> {
        self.peek()?;
        let end = self.value_end()?;
        if end == self.pos {
            return Err(self.syntax(self.pos, "expected a value"));
        }
        let value = self.parse(self.pos, end)?;
        self.pos = end;
        Ok(value)
    }

    /// Reads a whole state document into `loader`.
    pub(crate) fn read_state(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        // Byte-order mark (written by some Windows editors).
        if self.peek()?.is_some() && self.buf[self.pos..self.end].starts_with(b"\xEF\xBB\xBF") {
            self.pos += 3;
        }
        match self.peek()? {
            Some(b'{') => self.pos += 1,
            None => return Err(Error::not_a_state(self.origin, "the file is empty")),
            Some(b) => {
                let rest = &self.buf[self.pos..self.end];
                let what = match b {
                    b'[' => "an array",
                    b'"' => "a string",
                    b'-' | b'0'..=b'9' => "a number",
                    // Only the literal itself is a boolean or null (`nonsense` is not).
                    b't' | b'f' if rest.starts_with(b"true") || rest.starts_with(b"false") => {
                        "a boolean"
                    }
                    b'n' if rest.starts_with(b"null") => "null",
                    _ => return Err(self.syntax(self.pos, "expected a JSON object")),
                };
                return Err(Error::not_a_state(
                    self.origin,
                    format!("the document is {what}, not a JSON object"),
                ));
            }
        }
        let mut deferred: Option<(Vec<u8>, usize, usize)> = None;
        if self.peek()? == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                if self.peek()? != Some(b'"') {
                    return Err(self.syntax(self.pos, "expected a field name"));
                }
                let key: String = self.next_value()?;
                self.expect(b':', "expected `:` after a field name")?;
                match key.as_str() {
                    "version" => loader.header.version = Some(self.next_value()?),
                    // Terraform reads `serial` as an unsigned integer (`null` as 0)
                    // and `lineage` as a string: anything else is not a state.
                    "serial" => {
                        let v: serde_json::Value = self.next_value()?;
                        loader.header.serial = match &v {
                            serde_json::Value::Null => 0,
                            v => v.as_u64().ok_or_else(|| {
                                Error::not_a_state(
                                    self.origin,
                                    format!(
                                        "field `serial` is {}, expected an integer of 0 or more",
                                        shown(v)
                                    ),
                                )
                            })?,
                        };
                    }
                    "lineage" => {
                        let v: serde_json::Value = self.next_value()?;
                        loader.header.lineage = match v {
                            serde_json::Value::String(s) if !s.trim().is_empty() => s,
                            v => {
                                return Err(Error::not_a_state(
                                    self.origin,
                                    format!(
                                        "field `lineage` is {}, expected the state's lineage (a non-empty string)",
                                        shown(&v)
                                    ),
                                ));
                            }
                        };
                    }
                    "terraform_version" => {
                        let v: Option<String> = self.next_value()?;
                        loader.header.terraform_version = v.unwrap_or_default();
                    }
                    "resources" => {
                        loader.header.saw_resources = true;
                        match loader
                            .header
                            .version
                            .as_ref()
                            .map(serde_json::Value::as_u64)
                        {
                            Some(Some(4)) => self.resources(loader)?,
                            // Another version: reported by the caller; skip the body.
                            Some(_) => {
                                self.next_value::<IgnoredAny>()?;
                            }
                            // `version` not seen yet (Terraform writes it first; other
                            // tools may not): keep the text and read it afterwards.
                            None => {
                                self.peek()?;
                                let end = self.value_end()?;
                                let (line, col) = self.line_col(self.pos);
                                deferred = Some((self.buf[self.pos..end].to_vec(), line, col - 1));
                                self.pos = end;
                            }
                        }
                    }
                    "outputs" if loader.secrets.is_some() => self.outputs(loader)?,
                    _ => {
                        self.next_value::<IgnoredAny>()?;
                    }
                }
                match self.peek()? {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.syntax(self.pos, "expected `,` or `}` after a field")),
                }
            }
        }
        if self.peek()?.is_some() {
            return Err(self.syntax(self.pos, "trailing characters after the state object"));
        }
        if let Some((bytes, line, col)) = deferred
            && loader
                .header
                .version
                .as_ref()
                .and_then(serde_json::Value::as_u64)
                == Some(4)
        {
            let hint = u64::try_from(bytes.len()).ok();
            let mut inner = Reader::new(self.origin, self.path, bytes.as_slice(), hint);
            inner.base_line = line;
            inner.base_col = col;
            inner.resources(loader)?;
        }
        Ok(())
    }

    /// Reads the `resources` array at the cursor, one element at a time.
    fn resources(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        match self.peek()? {
            Some(b'[') => self.pos += 1,
            _ => {
                let v: serde_json::Value = self.next_value()?;
                return Err(Error::not_a_state(
                    self.origin,
                    format!(
                        "field `resources` is {}, expected an array (`[]` when empty)",
                        shown(&v)
                    ),
                ));
            }
        }
        if self.peek()? == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.peek()?;
            let end = self.value_end()?;
            if end == self.pos {
                return Err(self.syntax(self.pos, "expected a resource object"));
            }
            let resource: RawResource<'_> = self.parse(self.pos, end)?;
            if let Err(e) = loader.add_resource(resource) {
                return Err(self.json_error(self.pos, &e));
            }
            self.pos = end;
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    return Err(self.syntax(self.pos, "expected `,` or `]` in `resources`"));
                }
            }
        }
    }
}

/// A JSON value as shown in an error: its text, cut after 40 characters.
fn shown(v: &serde_json::Value) -> String {
    let mut text = v.to_string();
    if text.chars().count() > 40 {
        text = text.chars().take(40).collect();
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::count_newlines;

    #[test]
    fn counts_newlines_in_any_length() {
        for len in [
            0,
            1,
            63,
            64,
            65,
            255 * 64 - 1,
            255 * 64,
            255 * 64 + 1,
            100_000,
        ] {
            let bytes: Vec<u8> = (0..len)
                .map(|i| if i % 7 == 0 { b'\n' } else { b'x' })
                .collect();
            let expected = bytes.iter().filter(|&&b| b == b'\n').count();
            assert_eq!(count_newlines(&bytes), expected, "len {len}");
        }
        assert_eq!(count_newlines(&[b'\n'; 300 * 64]), 300 * 64);
    }
}
