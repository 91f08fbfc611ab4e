//! Certificates for a local control plane: when none are given, a CA, a serving certificate and
//! an admin client certificate (group `system:masters`) are made in the data directory once and
//! reused after; and the admin kubeconfig that uses them. `genplane pki` makes the same ahead of
//! time, for API servers that share them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::json;

/// Why certificates or a kubeconfig could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    /// A file could not be read or written.
    #[error("{what} {path}")]
    File {
        /// What was being done (`reading`, `writing`, ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A key or certificate could not be made or parsed.
    #[error(transparent)]
    Certificate(#[from] rcgen::Error),
    /// A key in a file could not be parsed.
    #[error("parsing {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rcgen::Error,
    },
    /// The kubeconfig could not be encoded.
    #[error("encoding the kubeconfig: {0}")]
    Encode(String),
    /// The service-account signing key could not be read or made.
    #[error("making the service-account signing key {path}")]
    ServiceAccountKey {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: genplane_authentication::keys::KeyError,
    },
    /// A certificate and key given cannot be used.
    #[error("{path}: {why}")]
    Unusable {
        /// The certificate.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// No client identity has this name.
    #[error(
        "no identity {0} (known: {known})", known = identities().join(", ")
    )]
    UnknownIdentity(String),
}

fn file_error(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PkiError {
    let path = path.to_owned();
    move |source| PkiError::File { what, path, source }
}

/// A client identity: a certificate, its key, and the user it names.
#[derive(Clone, Debug)]
pub struct Client {
    /// The user (the certificate's Common Name).
    pub user: &'static str,
    /// The file names' stem (`admin` gives `admin.crt`, `admin.key`, `admin.kubeconfig`).
    pub stem: &'static str,
    /// The certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// The PEM files a server runs with.
#[derive(Clone, Debug)]
pub struct Pki {
    /// The CA that signed the serving and client certificates.
    pub ca: PathBuf,
    /// The serving certificate.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The admin client certificate (group `system:masters`).
    pub admin_cert: PathBuf,
    /// Its key.
    pub admin_key: PathBuf,
    /// Every client identity: the admin's and one per other role, each with its own user.
    pub clients: Vec<Client>,
    /// The CA of the front proxy's client certificate, of its own (a certificate of the main
    /// CA cannot pass for the aggregator): extension API servers trust it for the
    /// front-proxy headers (`--requestheader-client-ca-file`).
    pub front_proxy_ca: PathBuf,
    /// The aggregator's client certificate to extension API servers (user
    /// [`PROXY_CLIENT_USER`]), signed by `front_proxy_ca`.
    pub proxy_client_cert: PathBuf,
    /// Its key.
    pub proxy_client_key: PathBuf,
}

/// The user of the aggregator's client certificate, which extension API servers allow
/// (`--requestheader-allowed-names`), as kubeadm names it.
pub const PROXY_CLIENT_USER: &str = "front-proxy-client";

/// The admin user's name in generated certificates.
pub const ADMIN_USER: &str = "genplane-admin";

/// The client identities made for a local control plane: (file stem, user, groups). The
/// roles' users are bound to least-privilege roles by the bootstrap RBAC policy.
const CLIENTS: &[(&str, &str, &[&str])] = &[
    ("admin", ADMIN_USER, &["system:masters"]),
    (
        "controller-manager",
        "system:genplane:controller-manager",
        &[],
    ),
    (
        "feature-controller",
        "system:genplane:feature-controller",
        &[],
    ),
    // The API server's own client, for reporting its feature uses.
    ("apiserver-loopback", "system:genplane:apiserver", &[]),
];

/// The file stems of the client identities [`ensure`] makes (`admin`, `controller-manager`,
/// ...): `<stem>.crt`, `<stem>.key` in the certificate directory and `<stem>.kubeconfig` beside
/// it.
pub fn identities() -> Vec<&'static str> {
    CLIENTS.iter().map(|(stem, _, _)| *stem).collect()
}

/// Writes `contents` to `path`; a `private` file (a key, a kubeconfig holding one) is
/// created readable by its owner only, never readable by others even for a moment.
fn write(path: &Path, contents: &str, private: bool) -> Result<(), PkiError> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mode = if private { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(file_error("writing", path))?;
    // An existing file keeps its mode on open: set it.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(file_error("protecting", path))?;
    file.write_all(contents.as_bytes())
        .map_err(file_error("writing", path))
}

/// The CA's parameters: the same each time, so that a saved CA key signs as the saved CA
/// certificate's subject.
fn ca_params() -> Result<CertificateParams, PkiError> {
    named_ca_params("genplane-ca")
}

/// The parameters of the CA named `name`.
fn named_ca_params(name: &str) -> Result<CertificateParams, PkiError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_after = rcgen::date_time_ymd(2036, 1, 1);
    Ok(ca)
}

/// The certificates in `dir`, made when missing (a certificate whose file is present is
/// kept). The serving certificate is valid for localhost, the loopback addresses and
/// `extra_hosts`; one that is not (another server's, copied with the CA) or that the CA did
/// not sign is made again, so that servers sharing a CA each serve a certificate of their own.
pub fn ensure(dir: &Path, extra_hosts: &[String]) -> Result<Pki, PkiError> {
    let clients: Vec<Client> = CLIENTS
        .iter()
        .map(|(stem, user, _)| Client {
            user,
            stem,
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
        })
        .collect();
    let pki = Pki {
        ca: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        admin_cert: clients[0].cert.clone(),
        admin_key: clients[0].key.clone(),
        clients,
        front_proxy_ca: dir.join("front-proxy-ca.crt"),
        proxy_client_cert: dir.join("front-proxy-client.crt"),
        proxy_client_key: dir.join("front-proxy-client.key"),
    };
    let ca_key_path = dir.join("ca.key");
    std::fs::create_dir_all(dir).map_err(file_error("creating", dir))?;
    let ca_key = if pki.ca.exists() && ca_key_path.exists() {
        let pem =
            std::fs::read_to_string(&ca_key_path).map_err(file_error("reading", &ca_key_path))?;
        KeyPair::from_pem(&pem).map_err(|source| PkiError::Parse {
            path: ca_key_path.clone(),
            source,
        })?
    } else {
        // A new CA: every certificate it signs is made again.
        for stale in [&pki.serving_cert, &pki.serving_key]
            .into_iter()
            .chain(pki.clients.iter().flat_map(|c| [&c.cert, &c.key]))
        {
            let _ = std::fs::remove_file(stale);
        }
        let key = KeyPair::generate()?;
        let cert = ca_params()?.self_signed(&key)?;
        write(&pki.ca, &cert.pem(), false)?;
        write(&ca_key_path, &key.serialize_pem(), true)?;
        key
    };
    let issuer = Issuer::new(ca_params()?, ca_key);

    let mut names: Vec<String> = vec![
        "localhost".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
    ];
    names.extend(
        extra_hosts
            .iter()
            .filter(|h| h.parse::<std::net::IpAddr>().is_err())
            .cloned(),
    );
    let ips: Vec<std::net::IpAddr> = ["127.0.0.1", "::1"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain(extra_hosts.iter().cloned())
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let usable = pki.serving_cert.exists()
        && pki.serving_key.exists()
        && match serving_fits(&pki.serving_cert, &pki.ca, &names, &ips) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!(
                    certificate = %pki.serving_cert.display(),
                    "the serving certificate {why}: making one for this server"
                );
                false
            }
        };
    if !usable {
        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(names)?;
        for ip in ips {
            serving.subject_alt_names.push(SanType::IpAddress(ip));
        }
        serving
            .distinguished_name
            .push(DnType::CommonName, "genplane-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.not_after = rcgen::date_time_ymd(2036, 1, 1);
        let serving_cert = serving.signed_by(&serving_key, &issuer)?;
        write(&pki.serving_cert, &serving_cert.pem(), false)?;
        write(&pki.serving_key, &serving_key.serialize_pem(), true)?;
    }

    for (client, (_, user, groups)) in pki.clients.iter().zip(CLIENTS) {
        if client.cert.exists() && client.key.exists() {
            continue;
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, *user);
        for group in *groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_after = rcgen::date_time_ymd(2036, 1, 1);
        let cert = params.signed_by(&key, &issuer)?;
        write(&client.cert, &cert.pem(), false)?;
        write(&client.key, &key.serialize_pem(), true)?;
    }
    ensure_front_proxy(dir, &pki)?;
    Ok(pki)
}

/// The front proxy's CA and client certificate, made when missing (with a new CA, the client
/// certificate is made again).
fn ensure_front_proxy(dir: &Path, pki: &Pki) -> Result<(), PkiError> {
    const NAME: &str = "genplane-front-proxy-ca";
    let key_path = dir.join("front-proxy-ca.key");
    let ca_key = if pki.front_proxy_ca.exists() && key_path.exists() {
        let pem = std::fs::read_to_string(&key_path).map_err(file_error("reading", &key_path))?;
        KeyPair::from_pem(&pem).map_err(|source| PkiError::Parse {
            path: key_path.clone(),
            source,
        })?
    } else {
        let _ = std::fs::remove_file(&pki.proxy_client_cert);
        let key = KeyPair::generate()?;
        let cert = named_ca_params(NAME)?.self_signed(&key)?;
        write(&pki.front_proxy_ca, &cert.pem(), false)?;
        write(&key_path, &key.serialize_pem(), true)?;
        key
    };
    if pki.proxy_client_cert.exists() && pki.proxy_client_key.exists() {
        return Ok(());
    }
    let issuer = Issuer::new(named_ca_params(NAME)?, ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, PROXY_CLIENT_USER);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let cert = params.signed_by(&key, &issuer)?;
    write(&pki.proxy_client_cert, &cert.pem(), false)?;
    write(&pki.proxy_client_key, &key.serialize_pem(), true)
}

/// Whether the serving certificate at `cert` was signed by the CA at `ca` and names every one
/// of `names` and `ips`; else why not.
fn serving_fits(
    cert: &Path,
    ca: &Path,
    names: &[String],
    ips: &[std::net::IpAddr],
) -> Result<(), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let der = |path: &Path| {
        CertificateDer::from_pem_file(path).map_err(|e| format!("cannot be read ({e})"))
    };
    let (cert_der, ca_der) = (der(cert)?, der(ca)?);
    fn parse<'a>(
        der: &'a CertificateDer<'_>,
    ) -> Result<x509_parser::certificate::X509Certificate<'a>, String> {
        x509_parser::parse_x509_certificate(der)
            .map(|(_, cert)| cert)
            .map_err(|e| format!("cannot be parsed ({e})"))
    }
    let (cert, ca) = (parse(&cert_der)?, parse(&ca_der)?);
    cert.verify_signature(Some(ca.public_key()))
        .map_err(|_| "was not signed by this server's CA".to_owned())?;
    let sans: Vec<&x509_parser::extensions::GeneralName<'_>> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| ext.value.general_names.iter().collect())
        .unwrap_or_default();
    let has_name = |name: &str| {
        sans.iter().any(|san| {
            matches!(san, x509_parser::extensions::GeneralName::DNSName(n) if n.eq_ignore_ascii_case(name))
        })
    };
    let has_ip = |ip: &std::net::IpAddr| {
        let octets = match ip {
            std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
            std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        sans.iter().any(|san| {
            matches!(san, x509_parser::extensions::GeneralName::IPAddress(a) if *a == octets.as_slice())
        })
    };
    if let Some(missing) = names.iter().find(|n| !has_name(n)) {
        return Err(format!("does not name {missing}"));
    }
    if let Some(missing) = ips.iter().find(|ip| !has_ip(ip)) {
        return Err(format!("does not name {missing}"));
    }
    Ok(())
}

/// Writes a kubeconfig for `server` that trusts `ca` and authenticates with a client
/// certificate.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    cert: &Path,
    key: &Path,
    user: &str,
) -> Result<(), PkiError> {
    let yaml = kubeconfig(&[server], ca, cert, key, user)?;
    write(path, &yaml, true)
}

/// The name of the cluster and context of the `index`th server of a kubeconfig: `genplane`,
/// then `genplane-2`, `genplane-3`, ...
pub fn context_name(index: usize) -> String {
    match index {
        0 => "genplane".to_owned(),
        n => format!("genplane-{}", n + 1),
    }
}

/// A kubeconfig that trusts `ca` and authenticates with a client certificate, with a cluster
/// and a context per server in `servers` (named by [`context_name`]), the first one current:
/// `kubectl --context genplane-2` asks the second server.
pub fn kubeconfig(
    servers: &[&str],
    ca: &Path,
    cert: &Path,
    key: &Path,
    user: &str,
) -> Result<String, PkiError> {
    let read = |p: &Path| std::fs::read(p).map_err(file_error("reading", p));
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    let ca = b64(read(ca)?);
    let names: Vec<String> = (0..servers.len()).map(context_name).collect();
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": servers.iter().zip(&names).map(|(server, name)| json!({
            "name": name,
            "cluster": {"server": server, "certificate-authority-data": ca},
        })).collect::<Vec<_>>(),
        "users": [{"name": user, "user": {"client-certificate-data": b64(read(cert)?), "client-key-data": b64(read(key)?)}}],
        "contexts": names.iter().map(|name| json!({
            "name": name,
            "context": {"cluster": name, "user": user},
        })).collect::<Vec<_>>(),
        "current-context": context_name(0),
    });
    serde_saphyr::to_string(&config).map_err(|e| PkiError::Encode(e.to_string()))
}

/// The options of `genplane pki` (see [`prepare`]).
#[derive(clap::Args, Clone, Debug)]
pub struct PkiOptions {
    /// The directory: certificates and keys go to DIR/pki, kubeconfigs to DIR (the layout of
    /// `genplane apiserver --data-dir DIR`)
    #[arg(long, value_name = "DIR", default_value = ".genplane")]
    pub data_dir: PathBuf,
    /// More names and IP addresses for the serving certificate, comma-separated, besides
    /// localhost, kubernetes, kubernetes.default, 127.0.0.1 and ::1
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub apiserver_cert_extra_sans: Vec<String>,
    /// The API server URL the kubeconfigs name (repeatable: a context per server, the first
    /// current, `genplane-2` the second)
    #[arg(long, value_name = "URL", default_value = "https://127.0.0.1:6443", value_parser = check_server_url)]
    pub server: Vec<String>,
    /// Which kubeconfigs to write, comma-separated (default: every identity)
    #[arg(long, value_name = "IDENTITIES", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(identities()), conflicts_with = "print_kubeconfig")]
    pub kubeconfigs: Vec<String>,
    /// Write no kubeconfig; print this identity's to standard output (what had to be made is
    /// reported on standard error)
    #[arg(long, value_name = "IDENTITY", value_parser = clap::builder::PossibleValuesParser::new(identities()))]
    pub print_kubeconfig: Option<String>,
}

impl PkiOptions {
    /// Makes what the options ask for ([`prepare`]).
    pub fn prepare(&self) -> Result<Prepared, PkiError> {
        let kubeconfigs = match &self.print_kubeconfig {
            Some(stem) => Kubeconfigs::Print(stem),
            None => Kubeconfigs::Write(&self.kubeconfigs),
        };
        prepare(
            &self.data_dir,
            &self.apiserver_cert_extra_sans,
            &self.server,
            kubeconfigs,
        )
    }
}

/// What [`prepare`] does with kubeconfigs.
#[derive(Clone, Copy, Debug)]
pub enum Kubeconfigs<'a> {
    /// Writes `<stem>.kubeconfig` beside the certificate directory for each of these
    /// identities ([`identities`]; empty: every one).
    Write(&'a [String]),
    /// Writes none and returns this identity's.
    Print(&'a str),
}

/// What [`prepare`] did: a line per file (`made`, `made again`, `kept`, `wrote`), and the
/// kubeconfig asked for with [`Kubeconfigs::Print`].
#[derive(Debug)]
pub struct Prepared {
    /// A line per file.
    pub lines: Vec<String>,
    /// The kubeconfig to print, if asked for.
    pub printed: Option<String>,
}

/// Makes ahead of time what `genplane apiserver --data-dir DATA_DIR` makes at its first start,
/// reusing what is there (`genplane pki`): the certificates of [`ensure`] (the serving one
/// naming `extra_sans` too) and the service-account signing key under `DATA_DIR/pki/`, and
/// kubeconfigs naming `servers` (a context each, see [`kubeconfig`]).
pub fn prepare(
    data_dir: &Path,
    extra_sans: &[String],
    servers: &[String],
    kubeconfigs: Kubeconfigs<'_>,
) -> Result<Prepared, PkiError> {
    let dir = data_dir.join("pki");
    let before = snapshot(&dir)?;
    let made = ensure(&dir, extra_sans)?;
    let sa_key = dir.join(genplane_authentication::keys::GENERATED_KEY_FILE);
    genplane_authentication::keys::SigningKey::load_or_generate(&sa_key, Default::default())
        .map_err(|source| PkiError::ServiceAccountKey {
            path: sa_key.clone(),
            source,
        })?;
    let mut lines = Vec::new();
    for (path, bytes) in snapshot(&dir)? {
        let what = match before.get(&path) {
            None => "made",
            Some(old) if *old != bytes => "made again",
            Some(_) => "kept",
        };
        lines.push(format!("{what} {}", path.display()));
    }
    let servers: Vec<&str> = servers.iter().map(String::as_str).collect();
    let kubeconfig_of = |stem: &str| -> Result<String, PkiError> {
        let client = made
            .clients
            .iter()
            .find(|c| c.stem == stem)
            .ok_or_else(|| PkiError::UnknownIdentity(stem.to_owned()))?;
        kubeconfig(&servers, &made.ca, &client.cert, &client.key, client.user)
    };
    let wanted = match kubeconfigs {
        Kubeconfigs::Print(stem) => {
            return Ok(Prepared {
                lines,
                printed: Some(kubeconfig_of(stem)?),
            });
        }
        Kubeconfigs::Write([]) => identities(),
        Kubeconfigs::Write(stems) => stems.iter().map(String::as_str).collect(),
    };
    for stem in wanted {
        let path = data_dir.join(format!("{stem}.kubeconfig"));
        write(&path, &kubeconfig_of(stem)?, true)?;
        lines.push(format!(
            "wrote {} for {}",
            path.display(),
            servers.join(" ")
        ));
    }
    Ok(Prepared {
        lines,
        printed: None,
    })
}

/// The regular files of `dir` and their contents (none when it does not exist yet).
fn snapshot(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>, PkiError> {
    let mut files = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(file_error("reading", dir)(e)),
    };
    for entry in entries {
        let path = entry.map_err(file_error("reading", dir))?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path).map_err(file_error("reading", &path))?;
            files.insert(path, bytes);
        }
    }
    Ok(files)
}

/// Checks that `text` is an `https://HOST[:PORT][/PATH]` URL, as a kubeconfig's `server`.
pub fn check_server_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .ok_or_else(|| format!("{text:?} is not an https:// URL"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 address in brackets has colons of its own.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{text:?} names no host"));
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!(
            "{text:?}: the port {port:?} is not a number up to 65535"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure(dir.path(), &["10.0.0.5".into(), "cp.example".into()]).unwrap();
        let ca = std::fs::read_to_string(&first.ca).unwrap();
        let again = ensure(dir.path(), &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&again.ca).unwrap(),
            ca,
            "reused, not regenerated"
        );
        write_kubeconfig(
            &dir.path().join("admin.kubeconfig"),
            "https://127.0.0.1:6443",
            &first.ca,
            &first.admin_cert,
            &first.admin_key,
            ADMIN_USER,
        )
        .unwrap();
        let kubeconfig: serde_json::Value = serde_saphyr::from_str(
            &std::fs::read_to_string(dir.path().join("admin.kubeconfig")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            kubeconfig["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(kubeconfig["current-context"], "genplane");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&first.admin_key)
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }

    /// Two servers sharing a CA (the first's `pki/` copied to the second): the second serves a
    /// certificate for its own address, signed by the shared CA; the first's is kept.
    #[test]
    fn a_serving_certificate_for_another_address_is_made_again() {
        let first = tempfile::tempdir().unwrap();
        let a = ensure(first.path(), &["127.0.0.3".into()]).unwrap();
        let second = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(first.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), second.path().join(entry.file_name())).unwrap();
        }
        let b = ensure(second.path(), &["127.0.0.2".into()]).unwrap();
        assert_eq!(
            std::fs::read(&b.ca).unwrap(),
            std::fs::read(&a.ca).unwrap(),
            "the CA is shared"
        );
        assert_ne!(
            std::fs::read(&b.serving_cert).unwrap(),
            std::fs::read(&a.serving_cert).unwrap()
        );
        let ips = |extra: &str| {
            vec![
                "127.0.0.1".parse().unwrap(),
                "::1".parse().unwrap(),
                extra.parse().unwrap(),
            ]
        };
        let names = ["localhost".to_owned()];
        serving_fits(&b.serving_cert, &b.ca, &names, &ips("127.0.0.2")).unwrap();
        assert_eq!(
            serving_fits(&a.serving_cert, &a.ca, &names, &ips("127.0.0.2")),
            Err("does not name 127.0.0.2".to_owned())
        );
        // The first keeps its own.
        let kept = std::fs::read(&a.serving_cert).unwrap();
        ensure(first.path(), &["127.0.0.3".into()]).unwrap();
        assert_eq!(std::fs::read(&a.serving_cert).unwrap(), kept);
        // A certificate of another CA is made again too.
        let other = tempfile::tempdir().unwrap();
        let c = ensure(other.path(), &[]).unwrap();
        std::fs::copy(&c.serving_cert, &a.serving_cert).unwrap();
        std::fs::copy(&c.serving_key, &a.serving_key).unwrap();
        ensure(first.path(), &["127.0.0.3".into()]).unwrap();
        serving_fits(&a.serving_cert, &a.ca, &names, &ips("127.0.0.3")).unwrap();
    }

    #[test]
    fn every_role_gets_its_own_identity_signed_by_the_kept_ca() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure(dir.path(), &[]).unwrap();
        let cm = first
            .clients
            .iter()
            .find(|c| c.stem == "controller-manager")
            .unwrap()
            .clone();
        // A certificate removed later is made again by the same CA.
        std::fs::remove_file(&cm.cert).unwrap();
        let again = ensure(dir.path(), &[]).unwrap();
        assert_eq!(
            std::fs::read(&again.ca).unwrap(),
            std::fs::read(&first.ca).unwrap()
        );
        let pem = |p: &Path| {
            let text = std::fs::read_to_string(p).unwrap();
            rustls::pki_types::CertificateDer::from_pem_slice(text.as_bytes()).unwrap()
        };
        use rustls::pki_types::pem::PemObject as _;
        let ca_der = pem(&again.ca);
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        let role_der = pem(&cm.cert);
        let (_, role) = x509_parser::parse_x509_certificate(&role_der).unwrap();
        role.verify_signature(Some(ca.public_key())).unwrap();
        let user = genplane_authentication::x509::user_of_chain(&[role_der.to_vec()]).unwrap();
        assert_eq!(user.username, "system:genplane:controller-manager");
        assert_eq!(user.groups, ["system:authenticated"]);
        let admin =
            genplane_authentication::x509::user_of_chain(&[pem(&again.admin_cert).to_vec()])
                .unwrap();
        assert_eq!(admin.groups, ["system:masters", "system:authenticated"]);
    }

    /// A kubeconfig of several servers: a cluster and a context each, the first current, one
    /// user; the same CA and credentials for every one.
    #[test]
    fn a_kubeconfig_names_a_context_per_server_the_first_current() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ensure(dir.path(), &[]).unwrap();
        let yaml = kubeconfig(
            &["https://127.0.0.1:6443", "https://127.0.0.1:6444"],
            &pki.ca,
            &pki.admin_cert,
            &pki.admin_key,
            ADMIN_USER,
        )
        .unwrap();
        let config: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(config["current-context"], "genplane");
        let servers: Vec<(&str, &str)> = config["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    c["cluster"]["server"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            servers,
            [
                ("genplane", "https://127.0.0.1:6443"),
                ("genplane-2", "https://127.0.0.1:6444")
            ]
        );
        for (context, cluster) in config["contexts"].as_array().unwrap().iter().zip(&servers) {
            assert_eq!(context["name"], cluster.0);
            assert_eq!(context["context"]["cluster"], cluster.0);
            assert_eq!(context["context"]["user"], ADMIN_USER);
        }
        assert_eq!(config["users"].as_array().unwrap().len(), 1);
        assert_eq!(
            config["clusters"][0]["cluster"]["certificate-authority-data"],
            config["clusters"][1]["cluster"]["certificate-authority-data"]
        );
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn yaml(text: &str) -> serde_json::Value {
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn makes_what_an_api_server_needs_then_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let sans = strings(&["apiserver-1", "10.0.0.7"]);
        let first = prepare(
            &data,
            &sans,
            &strings(&["https://kubernetes:6443"]),
            Kubeconfigs::Write(&strings(&["controller-manager", "feature-controller"])),
        )
        .unwrap();
        let pki = data.join("pki");
        for file in [
            "ca.crt",
            "ca.key",
            "sa.key",
            "apiserver.crt",
            "apiserver.key",
            "admin.crt",
            "controller-manager.key",
        ] {
            let line = format!("made {}", pki.join(file).display());
            assert!(first.lines.contains(&line), "{line}: {:?}", first.lines);
        }
        // Only the kubeconfigs asked for, naming the server given.
        let cm = std::fs::read_to_string(data.join("controller-manager.kubeconfig")).unwrap();
        assert_eq!(
            yaml(&cm)["clusters"][0]["cluster"]["server"],
            "https://kubernetes:6443"
        );
        assert!(data.join("feature-controller.kubeconfig").exists());
        assert!(!data.join("admin.kubeconfig").exists());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data.join("controller-manager.kubeconfig")), 0o600);
        assert_eq!(mode(&pki.join("ca.key")), 0o600);
        assert_eq!(mode(&pki.join("sa.key")), 0o600);

        // Again with the same names: everything kept, byte for byte.
        let ca = std::fs::read(pki.join("ca.crt")).unwrap();
        let server = strings(&["https://127.0.0.1:6443"]);
        let again = prepare(&data, &sans, &server, Kubeconfigs::Write(&[])).unwrap();
        assert!(
            again
                .lines
                .iter()
                .filter(|l| l.contains("/pki/"))
                .all(|l| l.starts_with("kept ")),
            "{:?}",
            again.lines
        );
        assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
        // With no identity named, every identity's.
        for stem in identities() {
            assert!(data.join(format!("{stem}.kubeconfig")).exists(), "{stem}");
        }

        // A name the serving certificate lacks: it alone is made again, by the same CA.
        let more = prepare(
            &data,
            &strings(&["apiserver-2"]),
            &server,
            Kubeconfigs::Write(&[]),
        )
        .unwrap();
        let remade: Vec<&String> = more
            .lines
            .iter()
            .filter(|l| l.starts_with("made again "))
            .collect();
        assert_eq!(
            remade,
            [
                &format!("made again {}", pki.join("apiserver.crt").display()),
                &format!("made again {}", pki.join("apiserver.key").display()),
            ]
        );
        assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
    }

    #[test]
    fn prints_one_kubeconfig_with_a_context_per_server_and_writes_none() {
        let dir = tempfile::tempdir().unwrap();
        let report = prepare(
            dir.path(),
            &[],
            &strings(&["https://127.0.0.1:6443", "https://127.0.0.1:6444"]),
            Kubeconfigs::Print("admin"),
        )
        .unwrap();
        let config = yaml(report.printed.as_deref().unwrap());
        assert_eq!(config["current-context"], "genplane");
        assert_eq!(
            config["clusters"][1]["cluster"]["server"],
            "https://127.0.0.1:6444"
        );
        assert_eq!(config["contexts"][1]["name"], "genplane-2");
        assert_eq!(config["users"][0]["name"], ADMIN_USER);
        let kubeconfigs = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "kubeconfig")
            })
            .count();
        assert_eq!(kubeconfigs, 0);
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let error = prepare(&file, &[], &[], Kubeconfigs::Write(&[])).unwrap_err();
        let error = genplane_apimachinery::errors::chain(&error);
        assert!(error.contains(&file.display().to_string()), "{error}");
        let unknown = prepare(dir.path(), &[], &[], Kubeconfigs::Print("root")).unwrap_err();
        assert!(
            unknown.to_string().contains("no identity root"),
            "{unknown}"
        );
    }

    /// `genplane pki`'s command line, as the options' users parse it.
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        options: PkiOptions,
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let refused = |args: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                std::iter::once("pki").chain(args.iter().copied()),
            )
            .unwrap_err()
            .to_string()
        };
        assert!(refused(&["--server=http://x:6443"]).contains("is not an https:// URL"));
        assert!(refused(&["--server=https://"]).contains("names no host"));
        assert!(refused(&["--server=https://:6443"]).contains("names no host"));
        assert!(refused(&["--server=https://x:70000"]).contains("is not a number up to 65535"));
        <Cli as clap::Parser>::try_parse_from(["pki", "--server=https://[::1]:6443/prefix"])
            .unwrap();
        assert!(refused(&["--kubeconfigs=kubelet"]).contains("invalid value 'kubelet'"));
        assert!(refused(&["--print-kubeconfig=root"]).contains("invalid value 'root'"));
        assert!(
            refused(&["--print-kubeconfig=admin", "--kubeconfigs=admin"])
                .contains("cannot be used with")
        );
    }
}
