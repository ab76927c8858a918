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

/// 1-based line and column of the byte after `before`, which starts at 1-based line
/// `base_line` and 0-based byte column `base_col`.
fn position(base_line: usize, base_col: usize, before: &[u8]) -> (usize, usize) {
    let newlines = count_newlines(before);
    match memchr::memrchr(b'\n', before) {
        Some(last) => (base_line + newlines, before.len() - last),
        None => (base_line, base_col + before.len() + 1),
    }
}

/// `e`, from a fragment that starts at 1-based `line`, `column` of the file, with its
/// position in the whole file.
fn json_error_at(origin: &str, line: usize, column: usize, e: &serde_json::Error) -> Error {
    let at_line = line + e.line().saturating_sub(1);
    let at_column = if e.line() <= 1 {
        column + e.column().saturating_sub(1)
    } else {
        e.column()
    };
    Error::from_json_at(origin, e, at_line, at_column)
}

/// Deserializes one fragment of the file (`bytes`, starting at 1-based `line`,
/// `column`), errors positioned in the whole file.
fn parse_fragment<'s, T: Deserialize<'s>>(
    origin: &str,
    bytes: &'s [u8],
    at: impl Fn() -> (usize, usize),
) -> Result<T> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = at();
        let (line, column) = position(line, column - 1, &bytes[..e.valid_up_to()]);
        Error::not_a_state(
            origin,
            format!("the file is not UTF-8 text (invalid byte at line {line}, column {column})"),
        )
    })?;
    serde_json::from_str(text).map_err(|e| {
        let (line, column) = at();
        json_error_at(origin, line, column, &e)
    })
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
    /// Bytes read from `src` so far.
    read_total: u64,
    /// (index in `buf`, its 1-based line, its 0-based column): the last position
    /// [`Reader::line_col_onward`] found, reset by every fill.
    mark: (usize, usize, usize),
    /// Threads preparing resource elements besides this one (0: none).
    workers: usize,
    /// See [`Reader::with_workers`].
    help_from: usize,
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
            read_total: 0,
            mark: (0, 1, 0),
            workers: 0,
            help_from: HELP_WHEN_QUEUED,
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
        self.mark = (0, self.base_line, self.base_col);
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
        self.read_total += n as u64;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// 1-based line and column of `buf[at]`.
    fn line_col(&self, at: usize) -> (usize, usize) {
        position(self.base_line, self.base_col, &self.buf[..at.min(self.end)])
    }

    /// [`Reader::line_col`] of a position at or after the last one asked since the
    /// last fill, counting only the bytes in between (a walk over the buffer costs
    /// one pass, not one per position).
    fn line_col_onward(&mut self, at: usize) -> (usize, usize) {
        let (from, line, col) = self.mark;
        if at < from {
            return self.line_col(at);
        }
        let (line, column) = position(line, col, &self.buf[from..at.min(self.end)]);
        self.mark = (at, line, column - 1);
        (line, column)
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

    /// Parses the resource elements at the cursor straight from the buffered input
    /// and adds them to `loader`, with their separators: one pass over their text
    /// instead of a scan for each one's extent ([`Reader::value_end`]) and then its
    /// parse, and the buffered input checked to be UTF-8 once, as a whole, instead of
    /// element by element ([`parse_fragment`]). Stops at the first element that does
    /// not parse from what is buffered (it goes on past the buffered input, or it is
    /// bad) or at a separator it cannot see: the caller goes on from there as before,
    /// reading more input or giving the error as before.
    fn resources_in_place(&mut self, loader: &mut Loader<'_>) -> Result<InPlace> {
        let window = &self.buf[self.pos..self.end];
        // The UTF-8 part: all of it but a character cut by the end of the buffer (or
        // an invalid byte, which the caller then reports).
        let text = match std::str::from_utf8(window) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&window[..e.valid_up_to()]).unwrap_or_default(),
        };
        let bytes = text.as_bytes();
        let skip_ws = |mut at: usize| {
            while bytes.get(at).copied().is_some_and(is_ws) {
                at += 1;
            }
            at
        };
        let mut at = skip_ws(0);
        let stopped = loop {
            let mut stream = serde_json::Deserializer::from_str(text.get(at..).unwrap_or_default())
                .into_iter::<RawResource<'_>>();
            let Some(Ok(resource)) = stream.next() else {
                break InPlace::AtElement;
            };
            let len = stream.byte_offset();
            if let Err(e) = loader.add_resource(resource) {
                return Err(self.json_error(self.pos + at, &e));
            }
            at = skip_ws(at + len);
            match bytes.get(at) {
                Some(b',') => at = skip_ws(at + 1),
                Some(b']') => {
                    at += 1;
                    break InPlace::Done;
                }
                _ => break InPlace::AfterElement,
            }
        };
        self.pos += at;
        Ok(stopped)
    }

    /// Deserializes `buf[start..end]`, mapping errors to positions in the file.
    fn parse<'s, T: Deserialize<'s>>(&'s self, start: usize, end: usize) -> Result<T> {
        parse_fragment(self.origin, &self.buf[start..end], || self.line_col(start))
    }

    /// A serde_json error of the value starting at `buf[start]`, with its position in
    /// the whole file.
    fn json_error(&self, start: usize, e: &serde_json::Error) -> Error {
        let (line, column) = self.line_col(start);
        json_error_at(self.origin, line, column, e)
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

    /// Prepares the resource elements on `workers` threads besides this one (0: all
    /// on this thread), and on this one too whenever `help_from` batches or more wait
    /// for a worker ([`HELP_WHEN_QUEUED`]).
    pub(crate) fn with_workers(mut self, workers: usize, help_from: usize) -> Self {
        self.workers = workers;
        self.help_from = help_from;
        self
    }

    /// Bytes consumed from the source so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.read_total
    }

    /// Reads a whole state document into `loader`.
    pub(crate) fn read_state(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        self.read_document(loader, false)
    }

    /// Reads the top-level fields of a state up to `resources` (`version`, `serial`,
    /// `lineage`, `terraform_version`; `outputs` skipped) into `loader.header` and stops
    /// there, without reading the resources. Terraform writes `resources` after the
    /// others, so this reads the head of the file only; a state whose `resources`
    /// come first gives no serial and lineage (`Header::saw_resources` is set).
    pub(crate) fn read_head(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        self.read_document(loader, true)
    }

    fn read_document(&mut self, loader: &mut Loader<'_>, head_only: bool) -> Result<()> {
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
                    "resources" if head_only => {
                        loader.header.saw_resources = true;
                        return Ok(());
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
                    "outputs" if loader.secrets.is_some() && !head_only => self.outputs(loader)?,
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
        if self.workers > 0 {
            return self.resources_on_workers(loader);
        }
        loop {
            self.peek()?;
            match self.resources_in_place(loader)? {
                InPlace::Done => return Ok(()),
                InPlace::AtElement => {
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
                }
                InPlace::AfterElement => {}
            }
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

/// Where [`Reader::resources_in_place`] stopped.
enum InPlace {
    /// After the `]` of `resources`.
    Done,
    /// At (or in the white space before) an element it could not parse.
    AtElement,
    /// After an element, before a separator it could not see.
    AfterElement,
}

/// Bytes of resource elements handed to a worker at once.
const BATCH_BYTES: usize = 1 << 20;
/// Batches sent and not yet committed, at most: bounds what the pipeline holds (a few
/// MB of elements and their prepared forms).
const IN_FLIGHT: usize = 8;
/// Batches waiting for a worker from which the reading thread prepares the next batch
/// itself instead of queueing it: the workers have that much work ahead, and the
/// reading thread's spare time is not lost waiting for their answers.
pub(crate) const HELP_WHEN_QUEUED: usize = 2;

/// One resource element copied out of the read buffer, with its position in the file.
struct Element {
    start: usize,
    end: usize,
    /// 1-based line and column of its first byte.
    at: (usize, usize),
}

/// Resource elements for a worker: their bytes, back to back, in file order.
#[derive(Default)]
struct Batch {
    seq: usize,
    bytes: Vec<u8>,
    elements: Vec<Element>,
}

/// A worker's answer for one batch: its elements prepared, with their positions (for
/// the errors [`Loader::add_prepared`] may still give), or the first error.
type Prepared = Result<(crate::parse::Prepared, Vec<(usize, usize)>)>;

/// What a worker sends back: the batch's number, its answer, and the batch emptied
/// (its buffers are reused for a later batch, so they are not grown and faulted in
/// afresh each time).
type Answer = (usize, Prepared, Batch);

/// Parses and prepares every element of `batch` ([`crate::parse::Prepared::add`]).
fn prepare_batch(
    origin: &str,
    plugins: &[Box<dyn crate::StateIdentity>],
    keep: Option<crate::AttributeSelector>,
    mut secrets: Option<&mut crate::sensitive::Found>,
    batch: &Batch,
) -> Prepared {
    let mut out = crate::parse::Prepared::default();
    let mut positions = Vec::with_capacity(batch.elements.len());
    for el in &batch.elements {
        let raw: RawResource<'_> =
            parse_fragment(origin, &batch.bytes[el.start..el.end], || el.at)?;
        out.add(plugins, keep, secrets.as_deref_mut(), raw)
            .map_err(|e| json_error_at(origin, el.at.0, el.at.1, &e))?;
        positions.push(el.at);
    }
    Ok((out, positions))
}

/// The batches sent to the workers and their answers, committed in file order.
struct Flight {
    sent: usize,
    committed: usize,
    /// Answers that came before an earlier batch's.
    early: std::collections::BTreeMap<usize, Prepared>,
    /// An element's error was returned (the load is over).
    failed: bool,
    /// Emptied batches, for reuse.
    spare: Vec<Batch>,
    /// Batches sent and not yet taken by a worker.
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Flight {
    /// Commits one batch's answer.
    fn commit_one(origin: &str, loader: &mut Loader<'_>, answer: Prepared) -> Result<()> {
        let (mut prepared, positions) = answer?;
        for (i, (line, column)) in positions.into_iter().enumerate() {
            loader
                .add_prepared(&mut prepared, i)
                .map_err(|e| json_error_at(origin, line, column, &e))?;
        }
        Ok(())
    }

    /// Commits every answer that is next in order; with `wait`, blocks for answers
    /// until fewer than `keep` batches are in flight.
    fn commit(
        &mut self,
        origin: &str,
        loader: &mut Loader<'_>,
        done: &std::sync::mpsc::Receiver<Answer>,
        keep: usize,
    ) -> Result<()> {
        loop {
            while let Some(answer) = self.early.remove(&self.committed) {
                self.committed += 1;
                if let Err(e) = Self::commit_one(origin, loader, answer) {
                    self.failed = true;
                    return Err(e);
                }
            }
            if self.sent - self.committed < keep.max(1) {
                return Ok(());
            }
            match done.recv() {
                Ok((seq, answer, mut batch)) => {
                    self.early.insert(seq, answer);
                    batch.bytes.clear();
                    batch.elements.clear();
                    self.spare.push(batch);
                }
                // Every worker is gone (a plug-in panicked): the join reports it.
                Err(_) => return Ok(()),
            }
        }
    }
}

impl<R: Read> Reader<'_, R> {
    /// [`Reader::resources`] after the `[`, with the elements parsed and prepared on
    /// [`Reader::workers`] threads while this one reads, finds the elements' extents
    /// and commits the prepared elements in file order: the same nodes, ids, indexes
    /// and first error as one thread gives.
    fn resources_on_workers(&mut self, loader: &mut Loader<'_>) -> Result<()> {
        use std::sync::{Mutex, PoisonError, mpsc};
        let (plugins, keep) = loader.preparing();
        let collect = loader.secrets.is_some();
        let origin = self.origin;
        let workers = self.workers;
        let (work_tx, work_rx) = mpsc::channel::<Batch>();
        let work_rx = Mutex::new(work_rx);
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        std::thread::scope(|scope| {
            let (done_tx, done_rx) = mpsc::channel::<Answer>();
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let done_tx = done_tx.clone();
                    let work_rx = &work_rx;
                    let queued = &*queued;
                    scope.spawn(move || {
                        let mut found = collect.then(crate::sensitive::Found::default);
                        loop {
                            let next = work_rx
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .recv();
                            let Ok(batch) = next else { break };
                            queued.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                            let answer =
                                prepare_batch(origin, plugins, keep, found.as_mut(), &batch);
                            if done_tx.send((batch.seq, answer, batch)).is_err() {
                                break;
                            }
                        }
                        found
                    })
                })
                .collect();
            drop(done_tx);
            let mut flight = Flight {
                sent: 0,
                committed: 0,
                early: std::collections::BTreeMap::new(),
                failed: false,
                spare: Vec::new(),
                queued: std::sync::Arc::clone(&queued),
            };
            let scanned = self.scan_into(loader, &mut flight, &work_tx, &done_rx);
            drop(work_tx);
            // Whatever was sent is committed before the scan's own error is reported:
            // an earlier element's error comes first, as on one thread. (After an
            // element's error, nothing more is committed.)
            let committed = if flight.failed {
                Ok(())
            } else {
                flight.commit(origin, loader, &done_rx, 0)
            };
            for handle in handles {
                match handle.join() {
                    Ok(Some(found)) => {
                        if let Some(all) = loader.secrets.as_mut() {
                            all.merge(found);
                        }
                    }
                    Ok(None) => {}
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            committed.and(scanned)
        })
    }

    /// Reads the elements of `resources` into batches sent on `work`, committing the
    /// answers as they come; ends after the closing `]`.
    fn scan_into(
        &mut self,
        loader: &mut Loader<'_>,
        flight: &mut Flight,
        work: &std::sync::mpsc::Sender<Batch>,
        done: &std::sync::mpsc::Receiver<Answer>,
    ) -> Result<()> {
        let mut batch = Batch::default();
        let result = loop {
            if let Err(e) = self.peek() {
                break Err(e);
            }
            let end = match self.value_end() {
                Ok(end) if end == self.pos => {
                    break Err(self.syntax(self.pos, "expected a resource object"));
                }
                Ok(end) => end,
                Err(e) => break Err(e),
            };
            let at = self.line_col_onward(self.pos);
            let start = batch.bytes.len();
            batch.bytes.extend_from_slice(&self.buf[self.pos..end]);
            batch.elements.push(Element {
                start,
                end: batch.bytes.len(),
                at,
            });
            self.pos = end;
            if batch.bytes.len() >= BATCH_BYTES {
                if flight.queued.load(std::sync::atomic::Ordering::Relaxed) >= self.help_from {
                    Self::prepare_here(self.origin, loader, flight, &mut batch);
                } else {
                    self.send(flight, work, &mut batch);
                }
                // An element's error ends the load: the first one in file order.
                flight.commit(self.origin, loader, done, IN_FLIGHT)?;
            }
            match self.peek() {
                Ok(Some(b',')) => self.pos += 1,
                Ok(Some(b']')) => {
                    self.pos += 1;
                    break Ok(());
                }
                Ok(_) => break Err(self.syntax(self.pos, "expected `,` or `]` in `resources`")),
                Err(e) => break Err(e),
            }
        };
        if !batch.elements.is_empty() {
            self.send(flight, work, &mut batch);
        }
        result
    }

    fn send(&self, flight: &mut Flight, work: &std::sync::mpsc::Sender<Batch>, batch: &mut Batch) {
        let mut full = std::mem::replace(batch, flight.spare.pop().unwrap_or_default());
        full.seq = flight.sent;
        flight.sent += 1;
        flight
            .queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The workers live as long as `work`: a send cannot fail while scanning.
        let _ = work.send(full);
    }

    /// Prepares `batch` on this thread (its sensitive values go straight to the
    /// loader's), as the next batch in order, and empties it for reuse.
    fn prepare_here(origin: &str, loader: &mut Loader<'_>, flight: &mut Flight, batch: &mut Batch) {
        let (plugins, keep) = loader.preparing();
        let answer = prepare_batch(origin, plugins, keep, loader.secrets.as_mut(), batch);
        flight.early.insert(flight.sent, answer);
        flight.sent += 1;
        batch.bytes.clear();
        batch.elements.clear();
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
    use crate::{GraphBuilder, NodeId};

    /// Every node's address, identities, dependencies and kept attributes, and the
    /// sensitive values, of `path` loaded with `workers` worker threads and the
    /// reading thread helping from `help_from` queued batches.
    fn load(
        path: &std::path::Path,
        workers: usize,
        help_from: usize,
    ) -> (Vec<String>, Vec<String>) {
        let mut b = GraphBuilder::new(vec![Box::new(driftreactor_aws::AwsIdentity)])
            .keep_attributes(driftreactor_diff::kept_attributes)
            .collect_sensitive_values()
            .worker_threads(workers)
            .help_from(help_from);
        b.add_state_file("w", path).unwrap();
        let secrets = b.take_sensitive_values();
        let g = b.build();
        let nodes = (0..g.len())
            .map(|i| {
                let id = NodeId(u32::try_from(i).unwrap());
                let n = &g.nodes()[i];
                format!(
                    "{} {:?} {:?} {:?}",
                    n.address,
                    n.identities,
                    g.dependencies(id),
                    g.kept_attributes(id)
                )
            })
            .collect();
        (nodes, secrets)
    }

    #[test]
    fn batches_the_reading_thread_prepares_itself_load_as_one_thread_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfstate");
        // ≈ 5 MB: five batches.
        driftreactor_testkit::synth::write_state(&path, 3_200).unwrap();
        let one = load(&path, 0, 0);
        assert!(one.0.len() > 3_000 && !one.1.is_empty());
        // 0: every batch on the reading thread; 1: whenever a worker is behind.
        for (workers, help_from) in [(1, 0), (2, 0), (1, 1)] {
            assert_eq!(
                load(&path, workers, help_from),
                one,
                "{workers} workers, helping from {help_from}"
            );
        }
    }

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
