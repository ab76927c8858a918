//! Telling humans about drift: GitHub pull requests and Slack messages, with
//! redaction applied to everything that leaves the process.
//!
//! * [`Redactor`]: pure redaction of known secret values (from state's
//!   `sensitive_attributes`) and of values under secret-looking keys.
//! * [`DriftReport`] and the pure builders [`pr_title`], [`pr_body`], [`drift_record`];
//!   [`Fingerprint`] (workspace + sorted address set) and its branch
//!   `driftreactor/<workspace>/<slug>`.
//! * [`import_block_for`]: the Terraform `import` block for an unmanaged create.
//! * [`GitHub`]: one open PR per fingerprint, created, updated in place, commented and
//!   closed through the REST API (api.github.com or GitHub Enterprise).
//! * [`Slack`]: an incoming webhook, Block Kit, transitions only, grouped per workspace
//!   per window, retried, never blocking the caller.
//!
//! ```
//! use driftreactor_notify::{Fingerprint, Redactor};
//! let r = Redactor::new(["hunter2-secret".to_owned()]);
//! assert_eq!(r.text("password is hunter2-secret"), "password is [REDACTED]");
//! let fp = Fingerprint::new("prod", ["aws_security_group.web"]);
//! assert_eq!(fp.branch(), "driftreactor/prod/aws_security_group-web");
//! ```

#[cfg(feature = "fake")]
pub mod fake;
mod github;
mod import;
mod redact;
mod report;
mod retry;
mod slack;

pub use github::{GitHub, GitHubConfig, GitHubError, PullRequest};
pub use import::{ImportBlock, import_block_for};
pub use redact::{MIN_SECRET_LEN, REDACTED, Redactor, is_secret_key};
pub use report::{
    AttributeChange, BODY_MARKER, CodeVersion, DriftKind, DriftReport, DriftedAddress, Evidence,
    Fingerprint, Matched, PlanSummary, PlannedChange, UnmanagedTag, change_line, drift_record,
    evidence_change_lines, pr_body, pr_title, resolved_comment, slugify,
};
pub use slack::{
    QUEUE_SIZE, Slack, SlackConfig, Transition, TransitionKind, message as slack_message,
};
