//! Runnable examples of the driftreactor libraries; see README.md. This library is empty.
