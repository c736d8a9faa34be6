//! The pinned images the harness starts, read from `images/versions.env`, the
//! one file that pins versions (`scripts/setup.sh` builds from the same file).

const VERSIONS: &str = include_str!("../../images/versions.env");

fn var(name: &str) -> &'static str {
    VERSIONS
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim())
        .unwrap_or_else(|| panic!("images/versions.env has no {name}"))
}

/// An image name and tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRef {
    pub name: &'static str,
    pub tag: &'static str,
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.name, self.tag)
    }
}

fn prefixed(component: &str) -> &'static str {
    Box::leak(format!("{}/{component}", var("IMAGE_PREFIX")).into_boxed_str())
}

pub fn kafka() -> ImageRef {
    ImageRef {
        name: prefixed("kafka"),
        tag: var("KAFKA_VERSION"),
    }
}

pub fn etcd() -> ImageRef {
    ImageRef {
        name: prefixed("etcd"),
        tag: var("ETCD_DEB_VERSION"),
    }
}

pub fn toxiproxy() -> ImageRef {
    ImageRef {
        name: prefixed("toxiproxy"),
        tag: var("TOXIPROXY_VERSION").trim_start_matches('v'),
    }
}

/// The changefeed system's binaries, built from this workspace by
/// `scripts/build-system-image.sh` and tagged with the workspace version.
pub fn system() -> ImageRef {
    ImageRef {
        name: prefixed("system"),
        tag: env!("CARGO_PKG_VERSION"),
    }
}

/// The system's image built with the `mutants` feature (`make mutants`):
/// its nodes take `--mutant NAME`.
pub fn system_mutants() -> ImageRef {
    ImageRef {
        name: prefixed("system-mutants"),
        tag: env!("CARGO_PKG_VERSION"),
    }
}

/// Every third-party image a cluster needs, for the "run make setup" check.
pub fn all() -> Vec<ImageRef> {
    vec![etcd(), toxiproxy(), kafka()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn tags_come_from_versions_env() {
        assert_eq!(
            super::kafka().to_string(),
            format!("cdc-chaos/kafka:{}", super::var("KAFKA_VERSION"))
        );
        assert!(
            super::kafka().tag.starts_with("4."),
            "Kafka is pinned to a 4.x version"
        );
        assert!(
            super::toxiproxy().tag.starts_with("2."),
            "Toxiproxy is pinned to a 2.x version"
        );
        assert!(!super::etcd().tag.is_empty());
    }
}
