//! Recorded inputs on disk, for `replay`: `--state` files and folders (each file a
//! workspace named after it), event files and folders, read into report lines.

use std::path::{Path, PathBuf};

use driftreactor_event::NormalizeError;
use serde_json::value::RawValue;

use crate::estate::StateFile;
use crate::{Replay, ReportLine};

/// Why a `--state` or event path cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// A state file given does not exist.
    #[error("state file {} does not exist", .0.display())]
    NoStateFile(PathBuf),
    /// A state folder given holds no state file.
    #[error("state directory {} holds no *.tfstate or *.tfstate.json file", .0.display())]
    EmptyStateDir(PathBuf),
    /// An event file given does not exist.
    #[error("event file {} does not exist", .0.display())]
    NoEventFile(PathBuf),
    /// A folder cannot be listed.
    #[error("failed to list {}", .path.display())]
    List {
        /// The folder (or the entry that could not be read).
        path: PathBuf,
        /// The I/O error (or the walker's, e.g. a symbolic link loop).
        #[source]
        source: walkdir::Error,
    },
}

/// Every `--state` path (folders expanded to their `*.tfstate` / `*.tfstate.json`
/// files, recursively, sorted by path, hidden entries skipped) as a workspace named
/// after its file ([`workspace_name`]). Within one folder, states that would get the
/// same name are each named by their path relative to the folder instead, without the
/// extensions and without a last `/terraform` (`d/x/prod.tfstate` and
/// `d/y/prod.tfstate` → `x/prod` and `y/prod`; `d/a/terraform.tfstate` and
/// `d/b/a/terraform.tfstate` → `a` and `b/a`).
///
/// # Errors
/// [`InputError`] when a file does not exist, a folder holds no state file or cannot
/// be listed.
pub fn state_workspaces(paths: &[PathBuf]) -> Result<Vec<StateFile>, InputError> {
    let mut out = Vec::new();
    for path in paths {
        let files = state_files(path)?;
        let names: Vec<String> = files.iter().map(|f| workspace_name(f)).collect();
        for (i, file) in files.iter().enumerate() {
            let collides = names.iter().filter(|n| **n == names[i]).count() > 1;
            let name = match file.strip_prefix(path) {
                Ok(rel) if collides => relative_name(rel),
                _ => names[i].clone(),
            };
            out.push(StateFile::new(name, file.clone()));
        }
    }
    Ok(out)
}

/// `x/prod.tfstate` → `x/prod`, `b/a/terraform.tfstate` → `b/a` (`/`-separated).
fn relative_name(rel: &Path) -> String {
    let text = rel
        .iter()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    let text = strip_state_extensions(&text);
    match text.strip_suffix("/terraform") {
        Some(dir) => dir.to_owned(),
        None => text.to_owned(),
    }
}

/// `prod.tfstate.json` → `prod`, `prod.tfstate` → `prod`, `x.json` → `x`.
fn strip_state_extensions(name: &str) -> &str {
    let name = name.strip_suffix(".json").unwrap_or(name);
    name.strip_suffix(".tfstate").unwrap_or(name)
}

/// The workspace name of a state file: its name without `.tfstate` / `.tfstate.json`
/// / `.json` (`prod.tfstate` → `prod`), except Terraform's default
/// `terraform.tfstate` / `terraform.tfstate.json`, named after its folder
/// (`env/prod/terraform.tfstate` → `prod`; `terraform` when the folder has no name).
pub fn workspace_name(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = strip_state_extensions(&name);
    if stem == "terraform" {
        let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
        let folder = match parent {
            Some(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
            None => std::env::current_dir()
                .ok()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned())),
        };
        if let Some(folder) = folder.filter(|f| !f.is_empty()) {
            return folder;
        }
    }
    stem.to_owned()
}

fn state_files(path: &Path) -> Result<Vec<PathBuf>, InputError> {
    if !path.is_dir() {
        if !path.exists() {
            return Err(InputError::NoStateFile(path.to_owned()));
        }
        return Ok(vec![path.to_owned()]);
    }
    let files = walk(path)?
        .into_iter()
        .filter(|f| {
            let n = f.to_string_lossy();
            n.ends_with(".tfstate") || n.ends_with(".tfstate.json")
        })
        .collect::<Vec<_>>();
    if files.is_empty() {
        return Err(InputError::EmptyStateDir(path.to_owned()));
    }
    Ok(files)
}

/// The event files of one input: the file itself, or a folder's `*.json` / `*.jsonl`
/// / `*.ndjson` files, gzip-compressed or not (`*.json.gz`, …), recursively, sorted by
/// path, hidden entries skipped.
///
/// # Errors
/// [`InputError::NoEventFile`] when the path does not exist, [`InputError::List`]
/// when a folder cannot be listed.
pub fn event_files(path: &Path) -> Result<Vec<PathBuf>, InputError> {
    if !path.is_dir() {
        if !path.exists() {
            return Err(InputError::NoEventFile(path.to_owned()));
        }
        return Ok(vec![path.to_owned()]);
    }
    Ok(walk(path)?
        .into_iter()
        .filter(|f| is_event_file_name(f))
        .collect())
}

/// True for a `*.json`, `*.jsonl` or `*.ndjson` name, or one of those with `.gz` after
/// it (CloudTrail's log files as it delivers them to S3: `…_CloudTrail_….json.gz`).
fn is_event_file_name(f: &Path) -> bool {
    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(name);
    matches!(
        Path::new(name).extension().and_then(|e| e.to_str()),
        Some("json" | "jsonl" | "ndjson")
    )
}

/// Why a folder given as input gives no event: it holds no event file.
const NO_EVENT_FILES: &str = "no event files in this folder (`*.json`, `*.jsonl`, `*.ndjson`, each \
     optionally `.gz`; hidden entries skipped)";

/// Files under `dir`, recursively (following symbolic links), sorted by path,
/// skipping hidden entries (names starting with `.`) and what is under them.
fn walk(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    let entries = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in entries {
        match entry {
            Ok(e) if e.file_type().is_dir() => {}
            Ok(e) => out.push(e.into_path()),
            // A dangling symbolic link is a file that cannot be read (a rejected line
            // when it is an event file), not a folder that cannot be listed.
            Err(e)
                if e.depth() > 0
                    && e.loop_ancestor().is_none()
                    && e.path().is_some_and(|p| {
                        p.symlink_metadata()
                            .is_ok_and(|m| m.file_type().is_symlink())
                            && !p.exists()
                    }) =>
            {
                out.extend(e.path().map(Path::to_owned));
            }
            Err(e) => {
                let path = e.path().unwrap_or(dir).to_owned();
                return Err(InputError::List { path, source: e });
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The default cap on the size of one event file `replay` reads: 256 MiB, far above
/// the largest CloudTrail log file (CloudTrail delivers one every 5 minutes per
/// region, gzip-compressed; uncompressed they stay in the tens of MiB). Config key
/// `[replay] max_event_file_bytes`, flag `--max-event-file-bytes`.
pub const DEFAULT_MAX_EVENT_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Why one event file is not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The path is not a regular file (a FIFO, a device, a socket), after following
    /// symbolic links: reading it could block forever or never end.
    #[error("not a regular file ({0}): only regular files are read")]
    NotAFile(&'static str),
    /// The file is larger than the cap.
    #[error(
        "the file is larger than the {cap}-byte cap (`[replay] max_event_file_bytes`, \
         `--max-event-file-bytes`)"
    )]
    TooLarge {
        /// The cap in bytes.
        cap: u64,
    },
    /// The gzip file decompresses to more than the cap (a decompression bomb is never
    /// read past it).
    #[error(
        "the gzip file decompresses to more than the {cap}-byte cap \
         (`[replay] max_event_file_bytes`, `--max-event-file-bytes`)"
    )]
    DecompressedTooLarge {
        /// The cap in bytes.
        cap: u64,
    },
    /// The file starts as gzip (`1f 8b`) but does not decompress.
    #[error("cannot decompress the gzip file: {0}")]
    Gzip(std::io::Error),
    /// The file cannot be opened or read.
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one event file: only a regular file (symbolic links followed), at most `cap`
/// bytes. The type is checked before the file is opened, so a FIFO never blocks, and
/// the read stops past the cap, so a file that grows (or lies about its size) is never
/// read unbounded.
///
/// # Errors
/// [`ReadError`] saying why the file is not read.
///
/// A gzip file (it starts with the gzip magic `1f 8b`, whatever its name; several
/// members are read as one stream, as `gzip -d` does) is decompressed, and `cap` bounds
/// the decompressed bytes.
pub fn read_event_file(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let (file, opened) = open_event_file(path, cap)?;
    let mut file = std::io::BufReader::new(file);
    if is_gzip(&mut file)? {
        let mut bytes = Vec::new();
        CappedDecoder::new(file, cap)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        return Ok(bytes);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len().min(cap)).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > cap {
        return Err(ReadError::TooLarge { cap });
    }
    Ok(bytes)
}

/// The first two bytes of a gzip member (RFC 1952, section 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// True when what `reader` reads next starts with [`GZIP_MAGIC`] (nothing consumed).
fn is_gzip(reader: &mut impl std::io::BufRead) -> std::io::Result<bool> {
    Ok(reader.fill_buf()?.starts_with(&GZIP_MAGIC))
}

/// Reads at most `cap` bytes of `inner`, then fails with an error saying the gzip file
/// decompresses to more than the cap (a plain `take` would end the stream there and
/// leave a cut document).
/// The decompressed bytes of the gzip file `reader` reads, at most `cap` of them.
struct CappedDecoder<R: std::io::BufRead> {
    inner: flate2::bufread::MultiGzDecoder<R>,
    left: u64,
    cap: u64,
}

impl<R: std::io::BufRead> CappedDecoder<R> {
    fn new(reader: R, cap: u64) -> Self {
        Self {
            inner: flate2::bufread::MultiGzDecoder::new(reader),
            left: cap,
            cap,
        }
    }
}

/// The [`ReadError`] of a read error: the one a reader of this module put inside it
/// ([`CappedDecoder`]: the gzip file does not decompress, or past the cap), else
/// [`ReadError::Io`].
fn read_error(e: std::io::Error) -> ReadError {
    if !e.get_ref().is_some_and(|inner| inner.is::<ReadError>()) {
        return ReadError::Io(e);
    }
    let kind = e.kind();
    match e.into_inner().map(|inner| inner.downcast::<ReadError>()) {
        Some(Ok(read)) => *read,
        Some(Err(other)) => ReadError::Io(std::io::Error::new(kind, other)),
        None => ReadError::Io(kind.into()),
    }
}

/// The reason of a read error for a `rejected` line (see [`read_error`]).
fn read_failure(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ReadError>())
    {
        Some(read) => read.to_string(),
        None => format!("cannot read the file: {e}"),
    }
}

/// A decompression error, carrying [`ReadError::Gzip`] (see [`read_error`]).
fn gzip_failed(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), ReadError::Gzip(e))
}

impl<R: std::io::BufRead> std::io::Read for CappedDecoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more than the cap tells a file of exactly the cap from a bigger one.
            let mut one = [0u8; 1];
            return match self.inner.read(&mut one).map_err(gzip_failed)? {
                0 => Ok(0),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    ReadError::DecompressedTooLarge { cap: self.cap },
                )),
            };
        }
        let room = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = self.inner.read(&mut buf[..room]).map_err(gzip_failed)?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Opens one event file as [`read_event_file`] checks it: a regular file (before and
/// after opening) of at most `cap` bytes; with its metadata.
fn open_event_file(path: &Path, cap: u64) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(file_kind(&meta)));
    }
    if meta.len() > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let file = std::fs::File::open(path)?;
    // The type again, of what was opened (the path may have changed in between).
    let opened = file.metadata()?;
    if !opened.is_file() {
        return Err(ReadError::NotAFile(file_kind(&opened)));
    }
    Ok((file, opened))
}

/// What kind of file `meta` describes, in words, for [`ReadError::NotAFile`].
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}

/// Reads one input as given on the command line: a file, or a folder's event files
/// ([`event_files`]), each read with [`read_event_file`] (at most `cap` bytes) and handed
/// to `each` with its name, in order; an input that cannot be listed, or a file that
/// cannot be read, is handed over once as `Err(why)` under its name.
pub fn each_event_file(
    input: &Path,
    cap: u64,
    mut each: impl FnMut(String, Result<Vec<u8>, String>),
) {
    let files = match event_files(input) {
        Ok(files) if files.is_empty() => {
            each(input.display().to_string(), Err(NO_EVENT_FILES.to_owned()));
            return;
        }
        Ok(files) => files,
        Err(e) => {
            each(
                input.display().to_string(),
                Err(driftreactor_source::chain(&e)),
            );
            return;
        }
    };
    for f in files {
        let name = f.display().to_string();
        let bytes = read_event_file(&f, cap).map_err(|e| e.to_string());
        each(name, bytes);
    }
}

/// Event files up to this size are read whole and split
/// ([`driftreactor_source::split`], every shape it reads); larger ones are streamed
/// when they are a CloudTrail log file (`{"Records": [...]}`, record by record) or
/// JSON Lines (a few hundred KiB of lines at a time), so a replay's memory does not
/// grow with its files. Larger files of other shapes are read whole (at most the cap).
pub const STREAM_ABOVE_BYTES: u64 = 1 << 20;

/// Report lines handed over at once while a file is streamed.
const LINES_PER_PART: usize = 1024;

/// Bytes of whole lines split at once while a JSON Lines file is streamed.
const LINES_CHUNK_BYTES: usize = 256 * 1024;

/// Read buffer of a streamed event file, and the most of its head [`shape`] looks at.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The shape of a large event file, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{"Records": [...]}` (the first key is `Records`).
    Records,
    /// The first line is one or more whole JSON values.
    Lines,
    /// Anything else: read whole.
    Other,
}

/// The shape of the file whose first bytes (up to 64 KiB) are `head`.
fn shape(head: &[u8]) -> Shape {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let text = head.trim_ascii_start();
    if let Some(rest) = text.strip_prefix(b"{")
        && rest.trim_ascii_start().starts_with(b"\"Records\"")
    {
        return Shape::Records;
    }
    let Some(end) = text.iter().position(|&b| b == b'\n') else {
        return Shape::Other;
    };
    let first = &text[..end];
    let whole = serde_json::Deserializer::from_slice(first)
        .into_iter::<serde::de::IgnoredAny>()
        .all(|v| v.is_ok());
    if whole { Shape::Lines } else { Shape::Other }
}

/// Reads `{"Records": [...]}` from a reader, handing each record to a callback as it
/// is read (other top-level fields skipped).
struct LogFile<'f, F>(&'f mut F);

/// The `Records` array of [`LogFile`].
struct RecordList<'f, F>(&'f mut F);

impl<'de, F: FnMut(Box<serde_json::value::RawValue>)> serde::de::Visitor<'de> for LogFile<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a CloudTrail log file")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "Records" {
                map.next_value_seed(RecordList(&mut *self.0))?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de, F: FnMut(Box<serde_json::value::RawValue>)> serde::de::DeserializeSeed<'de>
    for RecordList<'_, F>
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Box<serde_json::value::RawValue>)> serde::de::Visitor<'de>
    for RecordList<'_, F>
{
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of records")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(record) = seq.next_element::<Box<serde_json::value::RawValue>>()? {
            (self.0)(record);
        }
        Ok(())
    }
}

/// `e` (from a chunk starting at 1-based line `first_line` of the file) with its line
/// in the whole file.
fn shift_line(e: NormalizeError, first_line: usize) -> NormalizeError {
    match e {
        NormalizeError::Json {
            line,
            column,
            message,
        } => NormalizeError::Json {
            line: line + first_line - 1,
            column,
            message,
        },
        other => other,
    }
}

impl Replay {
    /// The report line of one event of a file (labelled `label`), or of why it is
    /// unreadable, as [`Replay::process_input`] makes it.
    fn line_for(&mut self, label: String, item: Result<&RawValue, NormalizeError>) -> ReportLine {
        match item.and_then(crate::normalize_value) {
            Err(e) => ReportLine::rejected(label, &e),
            Ok(event) => {
                let ev = self.evaluate(event);
                let line = ReportLine::from_evaluated(label, &ev);
                if self.keep {
                    self.evaluated.push(ev);
                }
                line
            }
        }
    }

    /// Streams one large event file (see [`STREAM_ABOVE_BYTES`]) of `shape`: its
    /// report lines go to `each` [`LINES_PER_PART`] at a time (the last call with
    /// `true`). A file that breaks part-way keeps the lines before the break and adds
    /// one `rejected` line naming the record (`FILE#N`) and the JSON position.
    fn stream_file(
        &mut self,
        name: &str,
        reader: impl std::io::BufRead,
        shape: Shape,
        each: &mut impl FnMut(Vec<ReportLine>, bool),
    ) {
        let mut part: Vec<ReportLine> = Vec::with_capacity(LINES_PER_PART);
        let mut n = 0usize;
        let mut flush = |part: &mut Vec<ReportLine>, last: bool| {
            if !part.is_empty() || last {
                each(
                    std::mem::replace(part, Vec::with_capacity(LINES_PER_PART)),
                    last,
                );
            }
        };
        match shape {
            Shape::Records => {
                let mut de = serde_json::Deserializer::from_reader(reader);
                let mut emit = |record: Box<RawValue>| {
                    let line = self.line_for(format!("{name}#{n}"), Ok(&record));
                    n += 1;
                    part.push(line);
                    if part.len() == LINES_PER_PART {
                        flush(&mut part, false);
                    }
                };
                let read = serde::Deserializer::deserialize_map(&mut de, LogFile(&mut emit))
                    .and_then(|()| de.end());
                if let Err(e) = read {
                    // A read that failed (a gzip file that does not decompress, or
                    // past the cap) says so; a document that breaks names its position.
                    let label = format!("{name}#{n}");
                    let line = if e.is_io() {
                        // serde_json hands the reader's own error back.
                        ReportLine::unreadable(label, read_failure(&std::io::Error::from(e)))
                    } else {
                        self.line_for(label, Err(NormalizeError::json(&e)))
                    };
                    part.push(line);
                }
            }
            Shape::Lines | Shape::Other => {
                let mut reader = reader;
                let mut chunk = Vec::with_capacity(LINES_CHUNK_BYTES + 4096);
                // 1-based line of the chunk's first byte.
                let mut first_line = 1usize;
                // Why the read stopped early: one `rejected` line after the lines read.
                let mut failure: Option<String> = None;
                loop {
                    chunk.clear();
                    let mut lines = 0usize;
                    let mut eof = false;
                    while chunk.len() < LINES_CHUNK_BYTES {
                        match reader.read_until(b'\n', &mut chunk) {
                            Ok(0) => {
                                eof = true;
                                break;
                            }
                            Ok(_) => lines += 1,
                            Err(e) => {
                                // The whole lines before the error still replay; the cut
                                // one does not.
                                let whole = chunk.iter().rposition(|&b| b == b'\n');
                                chunk.truncate(whole.map_or(0, |i| i + 1));
                                failure = Some(read_failure(&e));
                                eof = true;
                                break;
                            }
                        }
                    }
                    if chunk.trim_ascii().is_empty() {
                        if eof {
                            break;
                        }
                        first_line += lines;
                        continue;
                    }
                    let bytes = if first_line == 1 {
                        chunk.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&chunk)
                    } else {
                        &chunk
                    };
                    match driftreactor_source::split(bytes) {
                        Ok((items, _)) => {
                            for item in items {
                                let item = item.map_err(|e| shift_line(e, first_line));
                                let line = self.line_for(format!("{name}#{n}"), item);
                                n += 1;
                                part.push(line);
                                if part.len() == LINES_PER_PART {
                                    flush(&mut part, false);
                                }
                            }
                        }
                        Err(e) => {
                            let line = self
                                .line_for(format!("{name}#{n}"), Err(shift_line(e, first_line)));
                            n += 1;
                            part.push(line);
                        }
                    }
                    first_line += lines;
                    if eof {
                        break;
                    }
                }
                if let Some(reason) = failure {
                    part.push(ReportLine::unreadable(format!("{name}#{n}"), reason));
                }
            }
        }
        flush(&mut part, true);
    }

    /// Replays one gzip file (see [`read_event_file`]): decompressed as it is read, at
    /// most `cap` bytes of it; a file that decompresses to at most
    /// [`STREAM_ABOVE_BYTES`] is processed whole, as a small file, a larger one streamed
    /// as a large file of its shape. A file that does not decompress, or decompresses
    /// past the cap, ends with one `rejected` line saying so (after the lines of the
    /// records read before, when it was streamed).
    fn replay_gzip(
        &mut self,
        name: &str,
        reader: impl std::io::BufRead,
        cap: u64,
        each: &mut impl FnMut(Vec<ReportLine>, bool),
    ) {
        use std::io::Read;
        let mut decoded = CappedDecoder::new(reader, cap);
        let mut head = Vec::new();
        if let Err(e) = (&mut decoded)
            .take(STREAM_ABOVE_BYTES + 1)
            .read_to_end(&mut head)
        {
            let reason = read_failure(&e);
            each(vec![ReportLine::unreadable(name.to_owned(), reason)], true);
            return;
        }
        if u64::try_from(head.len()).unwrap_or(u64::MAX) <= STREAM_ABOVE_BYTES {
            each(self.process_input(name, &head), true);
            return;
        }
        let shape = shape(&head[..head.len().min(READ_BUFFER_BYTES)]);
        let mut rest = std::io::BufReader::with_capacity(
            READ_BUFFER_BYTES,
            std::io::Cursor::new(head).chain(decoded),
        );
        if shape == Shape::Other {
            // Read whole (at most the cap), as a small file.
            let mut bytes = Vec::new();
            match rest.read_to_end(&mut bytes) {
                Ok(_) => each(self.process_input(name, &bytes), true),
                Err(e) => {
                    let reason = read_failure(&e);
                    each(vec![ReportLine::unreadable(name.to_owned(), reason)], true);
                }
            }
        } else {
            self.stream_file(name, rest, shape, each);
        }
    }

    /// Processes one input as given on the command line: a file, or a folder of event
    /// files ([`event_files`]), each read ([`read_event_file`], regular files only, at
    /// most the cap of [`Replay::max_event_file_bytes`]) and run through
    /// [`Replay::process_input`] under its path. An input that cannot be listed or
    /// read gives one `rejected` line saying why; the run goes on.
    pub fn process_path(&mut self, input: &Path) -> Vec<ReportLine> {
        let mut lines = Vec::new();
        self.for_each_file(input, |file| lines.extend(file));
        lines
    }

    /// [`Replay::process_path`], handing each file's lines to `each` as soon as the
    /// file is done (in order; one call with one `rejected` line for an input that
    /// cannot be listed or a file that cannot be read). Holds one file's lines at a
    /// time: [`Replay::for_each_part`] holds a few.
    pub fn for_each_file(&mut self, input: &Path, mut each: impl FnMut(Vec<ReportLine>)) {
        let mut file = Vec::new();
        self.for_each_part(input, |lines, last| {
            file.extend(lines);
            if last {
                each(std::mem::take(&mut file));
            }
        });
    }

    /// [`Replay::process_path`], handing the report lines to `each` as they are made,
    /// with `true` on the last call of each file: a file up to
    /// [`STREAM_ABOVE_BYTES`] in one call, a larger CloudTrail log file or JSON Lines
    /// file streamed (read record by record or a few hundred KiB of lines at a time,
    /// its lines handed over 1,024 at a time), so memory stays the same
    /// whatever the size and number of the files. A gzip file is decompressed as it is
    /// read (the cap bounds its decompressed bytes) and then treated the same way by its
    /// decompressed size. One call with one `rejected` line for an input that cannot be
    /// listed or a file that cannot be read.
    pub fn for_each_part(&mut self, input: &Path, mut each: impl FnMut(Vec<ReportLine>, bool)) {
        let cap = self.max_file_bytes;
        let files = match event_files(input) {
            Ok(files) if files.is_empty() => {
                let reason = NO_EVENT_FILES.to_owned();
                each(
                    vec![ReportLine::unreadable(input.display().to_string(), reason)],
                    true,
                );
                return;
            }
            Ok(files) => files,
            Err(e) => {
                let reason = driftreactor_source::chain(&e);
                each(
                    vec![ReportLine::unreadable(input.display().to_string(), reason)],
                    true,
                );
                return;
            }
        };
        for f in files {
            let name = f.display().to_string();
            let opened = open_event_file(&f, cap).and_then(|(file, meta)| {
                let mut reader = std::io::BufReader::with_capacity(READ_BUFFER_BYTES, file);
                let gzip = is_gzip(&mut reader)?;
                Ok((reader, meta, gzip))
            });
            match opened {
                Err(e) => each(vec![ReportLine::unreadable(name, e.to_string())], true),
                Ok((reader, _, true)) => self.replay_gzip(&name, reader, cap, &mut each),
                Ok((reader, meta, false)) if meta.len() > STREAM_ABOVE_BYTES => {
                    use std::io::{BufRead, Read};
                    let mut reader = reader.take(cap);
                    let shape = match reader.fill_buf() {
                        Ok(head) => shape(head),
                        Err(_) => Shape::Other,
                    };
                    if shape == Shape::Other {
                        // Read whole (at most the cap), as a small file.
                        let bytes = read_event_file(&f, cap).map_err(|e| e.to_string());
                        match bytes {
                            Ok(bytes) => each(self.process_input(&name, &bytes), true),
                            Err(reason) => each(vec![ReportLine::unreadable(name, reason)], true),
                        }
                    } else {
                        self.stream_file(&name, reader, shape, &mut each);
                    }
                }
                Ok(_) => {
                    let bytes = read_event_file(&f, cap).map_err(|e| e.to_string());
                    match bytes {
                        Ok(bytes) => each(self.process_input(&name, &bytes), true),
                        Err(reason) => each(vec![ReportLine::unreadable(name, reason)], true),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_walked_sorted_without_hidden_entries() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "b.json",
            "a/z.jsonl",
            "a.json",
            ".hidden.json",
            ".git/x.json",
            "c/notes.txt",
            "c/d/e.ndjson",
        ] {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "{}").unwrap();
        }
        let files: Vec<_> = event_files(d)
            .unwrap()
            .into_iter()
            .map(|p| p.strip_prefix(d).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, ["a/z.jsonl", "a.json", "b.json", "c/d/e.ndjson"]);
    }

    #[test]
    fn state_paths_become_workspaces_or_say_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("prod.tfstate"), "{}").unwrap();
        std::fs::create_dir_all(d.join("more")).unwrap();
        std::fs::write(d.join("more/stage.tfstate.json"), "{}").unwrap();
        std::fs::write(d.join("more/readme.md"), "").unwrap();
        let ws = state_workspaces(&[d.to_owned()]).unwrap();
        let names: Vec<_> = ws.iter().map(|s| s.workspace.as_str()).collect();
        assert_eq!(names, ["stage", "prod"]);
        assert_eq!(
            workspace_name(Path::new("env/prod/terraform.tfstate")),
            "prod"
        );
        assert_eq!(workspace_name(Path::new("a/terraform.tfstate.json")), "a");
        let err = state_workspaces(&[d.join("more/readme.md").with_extension("x")]).unwrap_err();
        assert!(err.to_string().starts_with("state file "), "{err}");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let err = state_workspaces(&[d.join("empty")]).unwrap_err();
        assert!(matches!(err, InputError::EmptyStateDir(_)), "{err}");
    }

    /// Trial finding 1: every `terraform.tfstate` of a folder became workspace
    /// `terraform`, so a folder of Terraform's standard layout failed as defined twice.
    #[test]
    fn repeated_state_flags_for_terraform_tfstate_files_get_distinct_workspaces() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "a/terraform.tfstate",
            "b/terraform.tfstate",
            "x/prod.tfstate",
            "y/prod.tfstate",
            "c/a/terraform.tfstate.json",
        ] {
            std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
            std::fs::write(d.join(f), "{}").unwrap();
        }
        let ws = state_workspaces(&[d.to_owned()]).unwrap();
        let names: Vec<_> = ws.iter().map(|s| s.workspace.as_str()).collect();
        assert_eq!(names, ["a", "b", "c/a", "x/prod", "y/prod"]);
        // Two paths given apart.
        let ws = state_workspaces(&[d.join("a/terraform.tfstate"), d.join("b/terraform.tfstate")])
            .unwrap();
        let names: Vec<_> = ws.iter().map(|s| s.workspace.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_is_an_unreadable_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.json"), "{}").unwrap();
        std::os::unix::fs::symlink(d.join("gone.json"), d.join("b.json")).unwrap();
        let files = event_files(d).unwrap();
        assert_eq!(files, [d.join("a.json"), d.join("b.json")]);
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read_and_never_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::os::unix::fs::symlink("/dev/zero", d.join("zero.json")).unwrap();
        let err = read_event_file(&d.join("zero.json"), 1024).unwrap_err();
        assert!(
            matches!(err, ReadError::NotAFile("a character device")),
            "{err}"
        );
        std::fs::write(d.join("big.json"), vec![b' '; 2048]).unwrap();
        let err = read_event_file(&d.join("big.json"), 1024).unwrap_err();
        assert!(err.to_string().contains("1024-byte cap"), "{err}");
        assert_eq!(
            read_event_file(&d.join("big.json"), 2048).unwrap().len(),
            2048
        );
        let err = read_event_file(d, 1024).unwrap_err();
        assert!(matches!(err, ReadError::NotAFile("a directory")), "{err}");
    }
}
