//! Examples live as [[example]] targets.
