//! The vocabulary types that are Prometheus label values (feature `prometheus`):
//! each encodes as its `as_str` name (`provider="aws"`, `verdict="drift"`), the same
//! words as the reports and the journal.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::{Provider, Verdict};

impl EncodeLabelValue for Provider {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

impl EncodeLabelValue for Verdict {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}
