//! Encryption at rest, as kube-apiserver 1.33 does it (`--encryption-provider-config`).
//!
//! - [`config`]: the `EncryptionConfiguration` file, parsed and validated into an
//!   [`EncryptionConfig`] that names the [`Transformer`] of each resource.
//! - [`transformer`]: the providers (`aesgcm`, `aescbc`, `secretbox`, `identity`) with
//!   upstream's exact on-disk formats, so a store written by one reads in the other.
//! - [`storage`]: [`Transformed`], the [`genplane_storage::Storage`] decorator that applies a
//!   transformer to one resource's values. It sits between the backend and the watch cache, so
//!   the cache holds plain objects and the store only ciphertext.
//!
//! ```
//! use genplane_storage_value::EncryptionConfig;
//! let yaml = br#"
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//!   - resources: [secrets]
//!     providers:
//!       - aesgcm:
//!           keys:
//!             - name: key1
//!               secret: MDEyMzQ1Njc4OWFiY2RlZg==
//!       - identity: {}
//! "#;
//! let config = EncryptionConfig::parse(yaml, "encryption.yaml").unwrap();
//! let secrets = config.transformer_for("", "secrets").unwrap();
//! let stored = secrets.to_storage(&"{}".into(), "/registry/secrets/default/a").unwrap();
//! assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
//! assert!(config.transformer_for("", "configmaps").is_none());
//! ```

#![warn(missing_docs)]

pub mod config;
pub mod storage;
pub mod transformer;

pub use config::{ConfigError, EncryptionConfig, GroupResource};
pub use storage::{CorruptObject, Transformed};
pub use transformer::{TransformError, Transformer};
