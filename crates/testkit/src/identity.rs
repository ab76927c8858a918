//! Running a [`StateIdentity`] plug-in by hand, over instances of a Terraform state
//! file (format version 4) or over hand-written attributes, and collecting what it
//! yields.

use std::path::Path;

use driftreactor_event::{StateIdentity, StateInstance};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The parts of a Terraform state file (format version 4) an identity test needs.
#[derive(Debug, Deserialize)]
pub struct State {
    /// `resources[]`.
    pub resources: Vec<Resource>,
}

/// One `resources[]` element.
#[derive(Debug, Deserialize)]
pub struct Resource {
    /// `managed` or `data`.
    pub mode: String,
    /// The resource type (`azurerm_subnet`).
    #[serde(rename = "type")]
    pub ty: String,
    /// The resource name within its module.
    pub name: String,
    /// The provider address as the state spells it.
    pub provider: String,
    /// `instances[]`.
    pub instances: Vec<Instance>,
}

/// One `instances[]` element.
#[derive(Debug, Deserialize)]
pub struct Instance {
    /// The unparsed `attributes` object.
    pub attributes: Box<RawValue>,
}

/// What a plug-in yielded for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    /// [`StateIdentity::identities`], in order.
    pub identities: Vec<String>,
    /// [`StateIdentity::parents`], in order.
    pub parents: Vec<String>,
    /// [`StateIdentity::account`].
    pub account: Option<String>,
}

impl State {
    /// Reads and parses the state file at `path`.
    ///
    /// # Panics
    /// When the file cannot be read or is not a state file, naming it.
    pub fn load(path: &Path) -> Self {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Runs `plugin` on the first instance of the managed resource `ty.name` (any
    /// module).
    ///
    /// # Panics
    /// When there is no such managed resource, or it has no instance.
    pub fn index(&self, plugin: &dyn StateIdentity, ty: &str, name: &str) -> Indexed {
        let r = self
            .resources
            .iter()
            .find(|r| r.mode == "managed" && r.ty == ty && r.name == name)
            .unwrap_or_else(|| panic!("{ty}.{name} not in state"));
        index(plugin, &r.ty, &r.provider, &r.instances[0].attributes)
    }
}

/// Runs `plugin` on one instance of resource type `ty` from `provider` with these
/// `attributes`.
pub fn index(
    plugin: &dyn StateIdentity,
    ty: &str,
    provider: &str,
    attributes: &RawValue,
) -> Indexed {
    let inst = StateInstance {
        resource_type: ty,
        provider,
        attributes,
    };
    let (mut identities, mut parents) = (Vec::new(), Vec::new());
    plugin.identities(&inst, &mut identities);
    plugin.parents(&inst, &mut parents);
    Indexed {
        identities,
        parents,
        account: plugin.account(&inst),
    }
}

/// `json` as a [`RawValue`], for hand-written attributes.
///
/// # Panics
/// When `json` is not one JSON value.
pub fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap_or_else(|e| panic!("{json}: {e}"))
}
