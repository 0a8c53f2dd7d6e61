//! The top-level `docker-compose.yml` and `Dockerfile`. These machines have no Docker engine, so
//! this checks what can be checked without one: the file parses; the four services are there;
//! onesided waits for a healthy PostgreSQL and points its audit store at it (same database,
//! user and port); every flag and environment variable the file hands to `onesided-server`
//! is one the server really has; Prometheus scrapes the port onesided serves `/metrics` on
//! (`--http-listen`); Grafana's provisioned data source is that Prometheus; every metric
//! the dashboard (`ops/grafana/dashboards/onesided.json`) queries is one a live server exports,
//! and every metric it exports is graphed, per node (its `instance` variable selects the nodes,
//! every series keeps its `instance`); and the image carries the server and the CLI, built
//! from the workspace's packages under their binaries' names.
//!
//! Where the server's flags come from: its `Args` are private to `server/src/main.rs`, and this
//! crate cannot name another crate's binary (`CARGO_BIN_EXE_*` is for its own). So the flags
//! are read from that source file's clap attributes (`#[arg(long, env = "…")]` on each field);
//! the server's own suite checks them against the binary's `--help`
//! (`server/tests/it/binary.rs`), where the binary is always built.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn compose() -> Yaml {
    let text = read("docker-compose.yml");
    let mut documents = YamlLoader::load_from_str(&text).expect("docker-compose.yml parses");
    assert_eq!(documents.len(), 1, "one YAML document");
    documents.remove(0)
}

/// A scalar as text (compose accepts numbers and booleans where it means strings).
fn scalar(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(text) | Yaml::Real(text) => Some(text.clone()),
        Yaml::Integer(number) => Some(number.to_string()),
        Yaml::Boolean(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// Compose's `${NAME:-default}` / `${NAME-default}` / `${NAME}` interpolation, with nothing set
/// in the environment (what a fresh checkout gets).
fn interpolate(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("an unclosed ${") + start;
        let inner = &rest[start + 2..end];
        if let Some((_, default)) = inner.split_once(":-").or_else(|| inner.split_once('-')) {
            out.push_str(default);
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `environment:` as pairs, in either of compose's forms (a map, or a list of `K=V`).
fn environment(service: &Yaml) -> Vec<(String, String)> {
    match &service["environment"] {
        Yaml::Hash(map) => map
            .iter()
            .map(|(key, value)| {
                (
                    scalar(key).unwrap(),
                    interpolate(&scalar(value).unwrap_or_default()),
                )
            })
            .collect(),
        Yaml::Array(items) => items
            .iter()
            .map(|item| {
                let text = scalar(item).unwrap();
                let (key, value) = text.split_once('=').unwrap_or((&text, ""));
                (key.to_string(), interpolate(value))
            })
            .collect(),
        Yaml::BadValue | Yaml::Null => Vec::new(),
        other => panic!("environment is neither a map nor a list: {other:?}"),
    }
}

fn env_value(service: &Yaml, key: &str) -> Option<String> {
    environment(service)
        .into_iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value)
}

/// `command:` / `entrypoint:` as words (a list, or a string split on whitespace).
fn words(value: &Yaml) -> Vec<String> {
    match value {
        Yaml::Array(items) => items
            .iter()
            .map(|item| interpolate(&scalar(item).unwrap()))
            .collect(),
        Yaml::String(text) => text.split_whitespace().map(interpolate).collect(),
        _ => Vec::new(),
    }
}

/// The server's long flags and environment variables, from the clap attributes of the fields
/// of `struct Args` in `server/src/main.rs`.
fn flags_from_source() -> (BTreeSet<String>, BTreeSet<String>) {
    let source = read("server/src/main.rs");
    let start = source
        .find("struct Args {")
        .expect("server/src/main.rs has `struct Args`");
    let body = &source[start..];
    let body = &body[..body.find("\n}").expect("struct Args ends")];
    let mut flags = BTreeSet::new();
    let mut envs = BTreeSet::new();
    let mut attribute = String::new();
    let mut in_attribute = false;
    for line in body.lines().skip(1) {
        let line = line.trim();
        if line.starts_with("///") || line.is_empty() {
            continue;
        }
        if line.starts_with("#[arg(") {
            in_attribute = true;
            attribute.clear();
        }
        if in_attribute {
            attribute.push_str(line);
            attribute.push(' ');
            if line.ends_with(")]") {
                in_attribute = false;
            }
            continue;
        }
        let Some((field, _)) = line.split_once(':') else {
            continue;
        };
        let field = field.trim().trim_start_matches("pub ").trim();
        let settings: Vec<&str> = attribute
            .trim()
            .trim_start_matches("#[arg(")
            .trim_end_matches(")]")
            .split(',')
            .map(str::trim)
            .collect();
        for setting in &settings {
            if *setting == "long" {
                flags.insert(format!("--{}", field.replace('_', "-")));
            } else if let Some(name) = setting.strip_prefix("long = ") {
                flags.insert(format!("--{}", name.trim_matches('"')));
            } else if let Some(name) = setting.strip_prefix("env = ") {
                envs.insert(name.trim_matches('"').to_string());
            }
        }
        attribute.clear();
    }
    (flags, envs)
}

#[test]
fn the_source_reading_finds_the_servers_flags() {
    // a guard on the parser above: these exist today, so it must find them
    let (flags, envs) = flags_from_source();
    for flag in [
        "--listen",
        "--data-dir",
        "--database-url",
        "--audit-durability",
        "--tls-cert",
        "--tls-key",
    ] {
        assert!(flags.contains(flag), "{flag} not found in {flags:?}");
    }
    for env in [
        "ONESIDED_LISTEN",
        "DATABASE_URL",
        "ONESIDED_ADMIN_TOKEN",
        "ONESIDED_TLS_CERT",
    ] {
        assert!(envs.contains(env), "{env} not found in {envs:?}");
    }
}

#[test]
fn compose_runs_the_server_against_a_healthy_postgres() {
    let compose = compose();
    let services = compose["services"].as_hash().expect("services");
    assert_eq!(
        services.len(),
        6,
        "postgres, three onesided nodes, prometheus and grafana"
    );
    let postgres = &compose["services"]["postgres"];
    assert!(!postgres.is_badvalue());

    // postgres: the image, its database and password, a named volume, pg_isready
    assert_eq!(postgres["image"].as_str(), Some("postgres:16"));
    let db = env_value(postgres, "POSTGRES_DB").expect("POSTGRES_DB");
    let password = env_value(postgres, "POSTGRES_PASSWORD").expect("POSTGRES_PASSWORD");
    let user = env_value(postgres, "POSTGRES_USER").unwrap_or_else(|| "postgres".into());
    let healthcheck = words(&postgres["healthcheck"]["test"]).join(" ");
    assert!(healthcheck.contains("pg_isready"), "{healthcheck}");
    let named_volumes = compose["volumes"].as_hash().expect("top-level volumes");
    let declared = |volume: &Yaml| {
        let text = scalar(volume).unwrap();
        let name = text.split(':').next().unwrap().to_string();
        assert!(
            named_volumes.contains_key(&Yaml::String(name.clone())),
            "volume {name} is not declared at the top level"
        );
        text
    };
    let pg_volumes: Vec<String> = postgres["volumes"]
        .as_vec()
        .expect("postgres volumes")
        .iter()
        .map(declared)
        .collect();
    assert!(pg_volumes
        .iter()
        .any(|v| v.ends_with(":/var/lib/postgresql/data")));

    let mut node_ids = BTreeSet::new();
    for (service, port) in NODES {
        let onesided = &compose["services"][service];
        assert!(!onesided.is_badvalue(), "no service {service}");
        let id = check_node(onesided, service, port, &declared, (&db, &password, &user));
        assert!(node_ids.insert(id), "two nodes with one --node-id");
    }
}

/// The three cluster nodes and the port each listens on.
const NODES: [(&str, u16); 3] = [
    ("onesided", 50051),
    ("onesided-2", 50052),
    ("onesided-3", 50053),
];

/// One node: built here, started once postgres is healthy, with a data volume and a check,
/// only flags the server has, listening on `port`, advertising its service name, with the
/// audit store in the compose PostgreSQL (`(database, password, user)`). Returns its node id.
fn check_node(
    onesided: &Yaml,
    service: &str,
    port: u16,
    declared: &dyn Fn(&Yaml) -> String,
    (db, password, user): (&str, &str, &str),
) -> String {
    assert_eq!(
        onesided["depends_on"]["postgres"]["condition"].as_str(),
        Some("service_healthy")
    );
    let context = scalar(&onesided["build"]["context"])
        .or_else(|| scalar(&onesided["build"]))
        .expect("onesided is built");
    assert_eq!(context, ".");
    let dockerfile =
        scalar(&onesided["build"]["dockerfile"]).unwrap_or_else(|| "Dockerfile".into());
    assert!(repo().join(&context).join(&dockerfile).is_file());
    let data_volumes: Vec<String> = onesided["volumes"]
        .as_vec()
        .expect("onesided volumes")
        .iter()
        .map(declared)
        .collect();
    assert!(data_volumes.iter().any(|v| v.ends_with(":/data")));
    let check = words(&onesided["healthcheck"]["test"]).join(" ");
    assert!(
        check.contains(&format!("/dev/tcp/127.0.0.1/{port}")),
        "{check}"
    );

    // every flag and variable it gives the server exists
    let (flags, envs) = flags_from_source();
    let mut passed = words(&onesided["entrypoint"]);
    passed.extend(words(&onesided["command"]));
    let passed_flags: Vec<String> = passed
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap().to_string())
        .collect();
    let given_env: Vec<(String, String)> = environment(onesided);
    let passed_env: Vec<&String> = given_env
        .iter()
        .map(|(key, _)| key)
        .filter(|key| key.starts_with("ONESIDED_") || *key == "DATABASE_URL")
        .collect();
    for flag in &passed_flags {
        assert!(flags.contains(flag), "onesided-server has no {flag}");
    }
    for env in &passed_env {
        assert!(envs.contains(*env), "onesided-server reads no {env}");
    }
    for (key, _) in &given_env {
        if !key.starts_with("ONESIDED_") && key != "DATABASE_URL" {
            assert_eq!(
                key, "RUST_LOG",
                "an environment variable the server ignores"
            );
            assert!(read("server/src/main.rs").contains("EnvFilter::try_from_default_env"));
        }
    }

    // what the file configures: all interfaces, the data volume, sync durability, an admin
    // token with a default, and the audit store in that PostgreSQL
    let setting = |flag: &str, env: &str| {
        passed
            .iter()
            .position(|word| word == flag)
            .map(|at| passed[at + 1].clone())
            .or_else(|| {
                passed
                    .iter()
                    .find_map(|word| word.strip_prefix(&format!("{flag}=")))
                    .map(str::to_string)
            })
            .or_else(|| env_value(onesided, env))
    };
    assert_eq!(
        setting("--listen", "ONESIDED_LISTEN"),
        Some(format!("0.0.0.0:{port}"))
    );
    assert_eq!(
        setting("--advertise", "ONESIDED_ADVERTISE"),
        Some(format!("http://{service}:{port}")),
        "a node advertises its service name and port"
    );
    assert_eq!(
        setting("--data-dir", "ONESIDED_DATA_DIR").as_deref(),
        Some("/data")
    );
    assert_eq!(
        setting("--audit-durability", "ONESIDED_AUDIT_DURABILITY").as_deref(),
        Some("sync")
    );
    let token = setting("--admin-token", "ONESIDED_ADMIN_TOKEN").expect("an admin token");
    assert!(!token.is_empty(), "the token has a default");
    let url = setting("--database-url", "DATABASE_URL").expect("a database URL");
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .unwrap_or_else(|| panic!("{url} is not a PostgreSQL URL"));
    let (credentials, location) = rest.rsplit_once('@').expect("user@host");
    assert_eq!(
        credentials,
        format!("{user}:{password}"),
        "the URL's user and password are POSTGRES_USER's and POSTGRES_PASSWORD's"
    );
    let (host, database) = location.split_once('/').expect("host/database");
    assert_eq!(host, "postgres:5432", "the postgres service, its port");
    let database = database.split('?').next().unwrap();
    assert_eq!(database, db, "the URL's database is POSTGRES_DB");
    setting("--node-id", "ONESIDED_NODE_ID").expect("a node id")
}

/// The lines of the Dockerfile's stages, by stage (continuation lines joined).
fn stages() -> Vec<Vec<String>> {
    let text = read("Dockerfile").replace("\\\n", " ");
    let mut stages: Vec<Vec<String>> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("FROM ") {
            stages.push(Vec::new());
        }
        stages
            .last_mut()
            .expect("the Dockerfile starts with FROM")
            .push(line.to_string());
    }
    stages
}

/// The `name = "…"` right after `header` (`[package]`, `[[bin]]`) in a Cargo.toml's text.
fn names_under(manifest: &str, header: &str) -> Vec<String> {
    manifest
        .split(header)
        .skip(1)
        .filter_map(|section| {
            section
                .lines()
                .find_map(|line| line.trim().strip_prefix("name = "))
                .map(|name| name.trim_matches('"').to_string())
        })
        .collect()
}

/// The binaries of the workspace member whose package is `package` (its `[[bin]]` names, or
/// the package's name for a `src/main.rs` without one); `None`: no such member.
fn binaries_of(package: &str) -> Option<Vec<String>> {
    let workspace = read("Cargo.toml");
    let members = workspace
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace's members");
    members
        .split(',')
        .map(|member| member.trim().trim_matches('"'))
        .filter(|member| !member.is_empty())
        .find_map(|member| {
            let manifest = read(&format!("{member}/Cargo.toml"));
            (names_under(&manifest, "[package]").first()? == package).then(|| {
                let bins = names_under(&manifest, "[[bin]]");
                if bins.is_empty() && repo().join(member).join("src/main.rs").is_file() {
                    vec![package.to_string()]
                } else {
                    bins
                }
            })
        })
}

#[test]
fn the_dockerfile_builds_the_server_and_runs_it_unprivileged() {
    let stages = stages();
    assert_eq!(stages.len(), 2, "a builder and a runtime stage");
    let builder = &stages[0];
    assert!(builder[0].starts_with("FROM rust:1-bookworm AS "));
    let name = builder[0].rsplit(' ').next().unwrap();
    let build = builder
        .iter()
        .find(|l| l.contains("cargo build "))
        .expect("the builder runs cargo build");
    let words: Vec<&str> = build.split_whitespace().collect();
    assert!(
        words.contains(&"--release") && words.contains(&"--locked"),
        "{build}"
    );
    let packages: Vec<&str> = words
        .windows(2)
        .filter(|pair| pair[0] == "-p")
        .map(|pair| pair[1])
        .collect();
    assert!(
        packages.contains(&"onesided-server") && packages.contains(&"onesided-cli"),
        "the server and the CLI: {build}"
    );
    // what the build leaves in target/release: the binaries of those workspace members
    let built: Vec<String> = packages
        .iter()
        .flat_map(|package| {
            binaries_of(package)
                .unwrap_or_else(|| panic!("the Dockerfile builds {package}, no workspace member"))
        })
        .collect();
    assert!(built.iter().any(|bin| bin == "onesided"), "{built:?}");

    let runtime = &stages[1];
    assert_eq!(runtime[0], "FROM debian:bookworm-slim");
    // the runtime stage's first line that `test` picks; `missing` says what it is
    let line = |missing: &str, test: &dyn Fn(&str) -> bool| {
        runtime.iter().find(|l| test(l)).expect(missing)
    };
    let from_builder = format!("COPY --from={name} ");
    let copied: Vec<(&str, &str)> = runtime
        .iter()
        .filter_map(|l| l.strip_prefix(&from_builder))
        .map(|rest| rest.split_once(' ').expect("COPY --from=… SOURCE TARGET"))
        .collect();
    let copies = |binary: &str| {
        copied.iter().any(|(source, target)| {
            *source == format!("/src/target/release/{binary}")
                && *target == format!("/usr/local/bin/{binary}")
        })
    };
    assert!(copies("onesided-server"), "the server: {copied:?}");
    assert!(copies("onesided"), "the CLI beside it: {copied:?}");
    for (source, _) in &copied {
        let binary = source.rsplit('/').next().unwrap();
        assert!(
            built.iter().any(|bin| bin == binary),
            "{source} is not a binary the build makes ({built:?})"
        );
    }
    assert!(
        builder.iter().any(|l| l == "WORKDIR /src"),
        "the build's target/ is /src/target"
    );
    let installs = line("packages", &|l| l.contains("apt-get install"));
    assert!(installs.contains("ca-certificates"));
    assert!(
        installs.contains(" bash"),
        "the compose health check runs bash"
    );
    let user = runtime
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    assert!(user != "root" && user != "0", "not root");
    assert!(runtime.iter().any(|l| l == "EXPOSE 50051"));
    assert!(runtime
        .iter()
        .any(|l| l == "ENTRYPOINT [\"onesided-server\"]"));
    let ignored = read(".dockerignore");
    assert!(ignored.lines().any(|l| l.trim() == "target/"));
}

#[test]
fn interpolation_takes_the_defaults() {
    assert_eq!(interpolate("a${X:-b}c${Y}d${Z-e}"), "abcde");
}

/// The `--http-listen` address the compose file gives onesided, and the port it publishes.
fn http_port(onesided: &Yaml) -> u16 {
    let command = words(&onesided["command"]);
    let at = command
        .iter()
        .position(|word| word == "--http-listen")
        .expect("onesided serves the web view and /metrics (--http-listen)");
    let address = &command[at + 1];
    let (host, port) = address.rsplit_once(':').expect("HOST:PORT");
    assert_eq!(host, "0.0.0.0", "reachable from the other containers");
    let port: u16 = port.parse().unwrap();
    let published: Vec<String> = onesided["ports"]
        .as_vec()
        .expect("onesided ports")
        .iter()
        .map(|port| scalar(port).unwrap())
        .collect();
    assert!(
        published.contains(&format!("127.0.0.1:{port}:{port}")),
        "the web view is published on 127.0.0.1 only: {published:?}"
    );
    port
}

/// The host file a service mounts at `target` (a `./…` bind mount), relative to the repository.
fn mounted(service: &Yaml, target: &str) -> String {
    service["volumes"]
        .as_vec()
        .expect("volumes")
        .iter()
        .map(|volume| scalar(volume).unwrap())
        .find_map(|volume| {
            let mut parts = volume.split(':');
            let (source, at) = (parts.next()?, parts.next()?);
            (at == target).then(|| source.to_string())
        })
        .and_then(|source| source.strip_prefix("./").map(str::to_string))
        .unwrap_or_else(|| panic!("nothing from the repository is mounted at {target}"))
}

fn yaml_file(path: &str) -> Yaml {
    let mut documents =
        YamlLoader::load_from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(documents.len(), 1, "{path}: one YAML document");
    documents.remove(0)
}

#[test]
fn prometheus_scrapes_the_port_onesided_serves_metrics_on() {
    let compose = compose();
    let onesided = &compose["services"]["onesided"];
    let prometheus = &compose["services"]["prometheus"];
    let port = http_port(onesided);
    let config_path = words(&prometheus["command"])
        .iter()
        .find_map(|word| word.strip_prefix("--config.file=").map(str::to_string))
        .unwrap_or_else(|| "/etc/prometheus/prometheus.yml".into());
    let config = yaml_file(&mounted(prometheus, &config_path));
    let jobs = config["scrape_configs"].as_vec().expect("scrape_configs");
    let job = jobs
        .iter()
        .find(|job| job["job_name"].as_str() == Some("onesided"))
        .expect("a scrape job named onesided");
    assert_eq!(
        job["metrics_path"].as_str().unwrap_or("/metrics"),
        "/metrics"
    );
    assert_ne!(
        job["scheme"].as_str(),
        Some("https"),
        "the endpoint is plain HTTP"
    );
    let targets: Vec<String> = job["static_configs"]
        .as_vec()
        .expect("static_configs")
        .iter()
        .flat_map(|group| group["targets"].as_vec().expect("targets").clone())
        .map(|target| scalar(&target).unwrap())
        .collect();
    let nodes: Vec<String> = NODES
        .iter()
        .map(|(service, _)| format!("{service}:{port}"))
        .collect();
    assert_eq!(
        targets, nodes,
        "the compose services and their --http-listen port"
    );
    // the other nodes serve it on the same port inside the network (published by node 1 only)
    for (service, _) in NODES {
        let command = words(&compose["services"][service]["command"]);
        let at = command
            .iter()
            .position(|word| word == "--http-listen")
            .unwrap_or_else(|| panic!("{service} serves /metrics (--http-listen)"));
        assert_eq!(command[at + 1], format!("0.0.0.0:{port}"), "{service}");
    }
}

/// Grafana's provisioning directory and where the dashboards are mounted.
fn grafana() -> (String, String, String) {
    let compose = compose();
    let grafana = &compose["services"]["grafana"];
    let provisioning = mounted(grafana, "/etc/grafana/provisioning");
    let providers = yaml_file(&format!("{provisioning}/dashboards/onesided.yml"));
    let path = providers["providers"][0]["options"]["path"]
        .as_str()
        .expect("a file provider with a path")
        .to_string();
    let dashboards = mounted(grafana, &path);
    (provisioning, dashboards, path)
}

#[test]
fn grafana_is_provisioned_with_that_prometheus_and_the_dashboard() {
    let compose = compose();
    let (provisioning, dashboards, _) = grafana();
    let sources = yaml_file(&format!("{provisioning}/datasources/prometheus.yml"));
    let source = &sources["datasources"][0];
    assert_eq!(source["type"].as_str(), Some("prometheus"));
    let prometheus_port = compose["services"]["prometheus"]["ports"][0]
        .as_str()
        .and_then(|mapping| mapping.rsplit(':').next())
        .expect("prometheus publishes its port")
        .to_string();
    assert_eq!(
        source["url"].as_str(),
        Some(format!("http://prometheus:{prometheus_port}").as_str()),
        "the compose service prometheus"
    );
    let uid = source["uid"].as_str().expect("a fixed uid").to_string();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&format!("{dashboards}/onesided.json"))).unwrap();
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for panel in panels {
        let title = &panel["title"];
        assert_eq!(panel["datasource"]["uid"], uid.as_str(), "panel {title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} queries nothing");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], uid.as_str(), "panel {title}");
        }
    }
}

/// Whether `word` names a metric the server exports (`onesided_…`, `process_…`).
fn is_metric(word: &str) -> bool {
    word.starts_with("onesided_") || word.starts_with("process_")
}

/// The metric names (`onesided_…`, `process_…`) a PromQL expression refers to.
fn metric_names(expression: &str) -> Vec<String> {
    expression
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| is_metric(word))
        .map(str::to_string)
        .collect()
}

/// Each metric selector of a PromQL expression: the metric's name and its `{…}` matchers
/// (empty without braces).
fn selectors(expression: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = expression;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        let word_end = rest[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(rest.len(), |end| start + end);
        let word = &rest[start..word_end];
        rest = &rest[word_end..];
        if !is_metric(word) {
            continue;
        }
        let matchers = match rest.strip_prefix('{') {
            Some(inside) => {
                let end = inside.find('}').expect("a closed selector");
                rest = &inside[end + 1..];
                inside[..end].to_string()
            }
            None => String::new(),
        };
        found.push((word.to_string(), matchers));
    }
    found
}

/// The label lists of a PromQL expression's `by (…)` clauses.
fn groupings(expression: &str) -> Vec<Vec<String>> {
    expression
        .split("by (")
        .skip(1)
        .map(|rest| {
            let list = rest.split(')').next().unwrap();
            list.split(',')
                .map(|label| label.trim().to_string())
                .collect()
        })
        .collect()
}

/// `GET /metrics` from a server in this process, over plain HTTP, after a session's call was
/// refused (a family with labels, like the error counts, shows only once it has a series).
fn live_metrics() -> String {
    use std::io::{Read, Write};
    let listener =
        onesided_server::http::HttpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr();
    let server = crate::Server::start_with(|config| config.http = Some(listener));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let admin = onesided_client::Admin::connect(&server.url, crate::ADMIN_TOKEN)
            .await
            .unwrap();
        let world = admin.create_world("metrics", 1).await.unwrap();
        let session = onesided_client::Session::attach(&server.url, &world.tokens[0])
            .await
            .unwrap();
        assert!(session.window("missing").await.is_err());
        session.close().await.unwrap();
    });
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The metric families a scrape announces (`# TYPE`), each with the sample names it takes
/// (a counter's `_total`, a histogram's `_bucket`, `_sum`, `_count`), and the sample names it
/// holds.
fn exported(text: &str) -> (Vec<(String, Vec<String>)>, BTreeSet<String>) {
    let mut families = Vec::new();
    let mut samples = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            let names: Vec<String> = match kind {
                // the classic text format names a counter's family with its `_total`
                "counter" if name.ends_with("_total") => vec![name.to_string()],
                "counter" => vec![format!("{name}_total")],
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|suffix| format!("{name}{suffix}"))
                    .collect(),
                _ => vec![name.to_string()],
            };
            samples.extend(names.iter().cloned());
            families.push((name.to_string(), names));
        } else if !line.starts_with('#') && !line.is_empty() {
            samples.insert(line.split(['{', ' ']).next().unwrap().to_string());
        }
    }
    (families, samples)
}

#[test]
fn the_dashboard_queries_only_metrics_the_server_exports_and_graphs_them_all() {
    let (_, dashboards, _) = grafana();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&format!("{dashboards}/onesided.json"))).unwrap();
    let queried: BTreeSet<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap().clone())
        .flat_map(|target| metric_names(target["expr"].as_str().expect("an expr")))
        .collect();
    let (families, samples) = exported(&live_metrics());
    assert!(
        families.len() >= 10,
        "a live server exports its metrics: {families:?}"
    );
    for name in &queried {
        assert!(
            samples.contains(name),
            "the dashboard queries {name}, which the server does not export ({samples:?})"
        );
    }
    for (family, names) in &families {
        assert!(
            names.iter().any(|name| queried.contains(name)),
            "the server exports {family}, which no dashboard panel shows"
        );
    }
}

/// The dashboard tells the nodes apart: its `instance` variable lists the nodes that report
/// `onesided_build_info` (a metric a live server exports), every selector of every query keeps
/// to the nodes it selects, every aggregation keeps `instance`, and every legend starts with
/// it.
#[test]
fn every_panel_is_per_node_and_filtered_by_the_instance_variable() {
    let (_, dashboards, _) = grafana();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&format!("{dashboards}/onesided.json"))).unwrap();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let instance = variables
        .iter()
        .find(|variable| variable["name"] == "instance")
        .expect("a variable named instance");
    assert_eq!(instance["type"], "query");
    let uid = &dashboard["panels"][0]["datasource"]["uid"];
    assert_eq!(
        &instance["datasource"]["uid"], uid,
        "the panels' data source"
    );
    let query = instance["query"]
        .as_str()
        .or_else(|| instance["query"]["query"].as_str())
        .expect("the variable's query");
    let listed = query
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(", instance)"))
        .unwrap_or_else(|| panic!("not label_values(METRIC, instance): {query}"));
    let (_, samples) = exported(&live_metrics());
    assert!(
        samples.contains(listed),
        "the variable lists the instances of {listed}, which a server does not export"
    );
    assert_eq!(instance["includeAll"], true, "all nodes at once too");
    assert_eq!(instance["multi"], true);

    for panel in dashboard["panels"].as_array().unwrap() {
        let title = &panel["title"];
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().expect("an expr");
            let found = selectors(expr);
            assert!(!found.is_empty(), "panel {title}: {expr} selects no metric");
            for (metric, matchers) in found {
                assert!(
                    matchers
                        .split(',')
                        .any(|matcher| matcher.trim() == "instance=~\"$instance\""),
                    "panel {title}: {metric} is not filtered by $instance in {expr}"
                );
            }
            for labels in groupings(expr) {
                assert!(
                    labels.iter().any(|label| label == "instance"),
                    "panel {title}: an aggregation merges the nodes in {expr}"
                );
            }
            assert!(
                !expr.contains(" without ("),
                "panel {title}: {expr} (spell out by (instance, …))"
            );
            let legend = target["legendFormat"].as_str().unwrap_or_default();
            assert!(
                legend.starts_with("{{instance}}"),
                "panel {title}: legend {legend:?} does not name the node"
            );
        }
    }
}

#[test]
fn selectors_and_groupings_are_read_from_promql() {
    let expr = "sum by (instance, le) (rate(onesided_x_bucket{instance=~\"$instance\"}[1m])) \
                / time() - process_start_time_seconds";
    assert_eq!(
        selectors(expr),
        [
            (
                "onesided_x_bucket".to_string(),
                "instance=~\"$instance\"".to_string()
            ),
            ("process_start_time_seconds".to_string(), String::new()),
        ]
    );
    assert_eq!(groupings(expr), [["instance", "le"]]);
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.99, sum by (le) (rate(onesided_x_bucket[1m]))) / onesided_y"
        ),
        ["onesided_x_bucket", "onesided_y"]
    );
}
