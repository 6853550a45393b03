//! The crate rules of ARCHITECTURE.md, checked against the workspace's manifests: the layers
//! depend only downwards, `core` and `protocol` do no I/O, only `mcp` uses the MCP SDK, and
//! nothing depends on the bench.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// The layers, lowest first: a crate may depend (for its build, not its tests) only on crates
/// of lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("holdpoint-protocol", 0),
    ("holdpoint-core", 1),
    ("holdpoint-llm", 1),
    ("holdpoint-client", 1),
    // A protocol library with a client (like `llm`), which the runtime calls remote agents
    // through.
    ("holdpoint-a2a", 1),
    ("holdpoint-store", 2),
    ("holdpoint-agent", 2),
    ("holdpoint-mcp", 2),
    ("holdpoint-server", 3),
    ("holdpoint-cli", 4),
];

/// Crates that do I/O (network, SQL, HTTP serving, files): none may reach `core` or
/// `protocol`, directly or through another dependency.
const IO_CRATES: &[&str] = &[
    "reqwest",
    "rusqlite",
    "libsqlite3-sys",
    "tokio-postgres",
    "postgres-protocol",
    "axum",
    "axum-core",
    "hyper",
    "hyper-util",
    "h2",
    "tower-http",
    "rustls",
    "tokio-rustls",
    "tempfile",
    "portable-pty",
];

/// Tokio features that do I/O, which `core` and `protocol` must not enable.
const IO_TOKIO_FEATURES: &[&str] = &["net", "process", "fs", "io-std", "signal", "full"];

struct Workspace {
    /// Package id → name.
    names: HashMap<String, String>,
    /// Package name → (dependency name, its kinds: "normal", "dev", "build").
    deps: HashMap<String, Vec<(String, Vec<String>)>>,
    /// Workspace package name → its manifest's dependencies, as `cargo metadata` lists them.
    manifests: HashMap<String, Vec<Value>>,
}

/// The platform this runs on (`x86_64-unknown-linux-gnu`, say): dependencies for other
/// platforms are left out, as they are neither built here nor downloaded.
fn host() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("rustc runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn workspace() -> Workspace {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(cargo)
        .args(["metadata", "--offline", "--format-version", "1"])
        .args(["--filter-platform", &host()])
        .args(["--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut names = HashMap::new();
    let mut manifests = HashMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let (id, name) = (
            p["id"].as_str().expect("id"),
            p["name"].as_str().expect("name"),
        );
        names.insert(id.to_owned(), name.to_owned());
        if members.contains(id) {
            let deps = p["dependencies"].as_array().cloned().unwrap_or_default();
            manifests.insert(name.to_owned(), deps);
        }
    }
    let mut deps = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let from = names[node["id"].as_str().expect("node id")].clone();
        let list = node["deps"]
            .as_array()
            .expect("node deps")
            .iter()
            .map(|d| {
                let to = names[d["pkg"].as_str().expect("dep pkg")].clone();
                let kinds = d["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .map(|k| k["kind"].as_str().unwrap_or("normal").to_owned())
                    .collect();
                (to, kinds)
            })
            .collect();
        deps.insert(from, list);
    }
    Workspace {
        names,
        deps,
        manifests,
    }
}

impl Workspace {
    /// What `name` depends on for its build (not its tests), directly.
    fn normal_deps(&self, name: &str) -> Vec<&str> {
        self.deps
            .get(name)
            .into_iter()
            .flatten()
            .filter(|(_, kinds)| kinds.iter().any(|k| k != "dev"))
            .map(|(to, _)| to.as_str())
            .collect()
    }

    /// Everything `name` is built with, through any chain of build dependencies.
    fn closure(&self, name: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name];
        while let Some(n) = todo.pop() {
            for d in self.normal_deps(n) {
                if seen.insert(d) {
                    todo.push(d);
                }
            }
        }
        seen
    }

    /// Every broken rule, in words.
    fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let layer: HashMap<&str, u8> = LAYERS.iter().copied().collect();
        for (from, from_layer) in LAYERS {
            for to in self.normal_deps(from) {
                if let Some(to_layer) = layer.get(to)
                    && to_layer >= from_layer
                {
                    out.push(format!(
                        "{from} depends on {to}, which is not a lower layer"
                    ));
                }
            }
        }
        for pure in ["holdpoint-core", "holdpoint-protocol"] {
            for io in self
                .closure(pure)
                .intersection(&IO_CRATES.iter().copied().collect())
            {
                out.push(format!("{pure} is built with {io}, a crate that does I/O"));
            }
            for dep in self.manifests.get(pure).into_iter().flatten() {
                if dep["name"] != "tokio" || dep["kind"].as_str() == Some("dev") {
                    continue;
                }
                for f in dep["features"].as_array().into_iter().flatten() {
                    if let Some(f) = f.as_str().filter(|f| IO_TOKIO_FEATURES.contains(f)) {
                        out.push(format!("{pure} enables tokio's I/O feature {f:?}"));
                    }
                }
            }
        }
        if self.closure("holdpoint-protocol").contains("tokio") {
            out.push("holdpoint-protocol is built with tokio: it is plain data".into());
        }
        // One crate speaks MCP through the SDK, so its types never leak into the others.
        for (from, deps) in &self.manifests {
            if from != "holdpoint-mcp" && deps.iter().any(|d| d["name"] == "rmcp") {
                out.push(format!("{from} depends on rmcp: only holdpoint-mcp may"));
            }
        }
        if self.closure("holdpoint-agent").contains("holdpoint-server") {
            out.push("holdpoint-agent depends on holdpoint-server".into());
        }
        // Declared, not resolved: Cargo drops a dependency on a package without a library
        // (as the bench is today) with only a warning.
        for (from, deps) in &self.manifests {
            if deps.iter().any(|d| d["name"] == "holdpoint-bench") {
                out.push(format!("{from} depends on holdpoint-bench"));
            }
        }
        out.sort();
        out
    }
}

#[test]
fn the_crate_rules_hold() {
    let ws = workspace();
    for (name, _) in LAYERS {
        assert!(
            ws.names.values().any(|n| n == name),
            "{name} is not in the workspace: update LAYERS"
        );
    }
    assert_eq!(ws.violations(), Vec::<String>::new());
}
