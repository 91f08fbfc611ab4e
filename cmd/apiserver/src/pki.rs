//! Certificates for a local control plane: when none are given, a CA, a serving certificate and
//! an admin client certificate (group `system:masters`) are made in the data directory once and
//! reused after; and the admin kubeconfig that uses them.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::json;

/// The PEM files a server runs with.
#[derive(Clone, Debug)]
pub struct Pki {
    /// The CA that signed the serving and client certificates.
    pub ca: PathBuf,
    /// The serving certificate.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The admin client certificate.
    pub admin_cert: PathBuf,
    /// Its key.
    pub admin_key: PathBuf,
}

/// The admin user's name in generated certificates.
pub const ADMIN_USER: &str = "genplane-admin";

fn write(path: &Path, contents: &str, private: bool) -> anyhow::Result<()> {
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("protecting {}", path.display()))?;
    }
    Ok(())
}

/// The certificates in `dir`, made when missing. The serving certificate is valid for
/// localhost, the loopback addresses and `extra_hosts`.
pub fn ensure(dir: &Path, extra_hosts: &[String]) -> anyhow::Result<Pki> {
    let pki = Pki {
        ca: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
    };
    let all = [
        &pki.ca,
        &pki.serving_cert,
        &pki.serving_key,
        &pki.admin_cert,
        &pki.admin_key,
    ];
    if all.iter().all(|p| p.exists()) {
        return Ok(pki);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "genplane-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate()?;
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
    let mut serving = CertificateParams::new(names)?;
    for ip in ["127.0.0.1", "::1"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain(extra_hosts.iter().cloned())
    {
        if let Ok(ip) = ip.parse() {
            serving.subject_alt_names.push(SanType::IpAddress(ip));
        }
    }
    serving
        .distinguished_name
        .push(DnType::CommonName, "genplane-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin
        .distinguished_name
        .push(DnType::CommonName, ADMIN_USER);
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    admin.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    write(&pki.ca, &ca_cert.pem(), false)?;
    write(&pki.serving_cert, &serving_cert.pem(), false)?;
    write(&pki.serving_key, &serving_key.serialize_pem(), true)?;
    write(&pki.admin_cert, &admin_cert.pem(), false)?;
    write(&pki.admin_key, &admin_key.serialize_pem(), true)?;
    Ok(pki)
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
) -> anyhow::Result<()> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "genplane", "cluster": {"server": server, "certificate-authority-data": b64(read(ca)?)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(read(cert)?), "client-key-data": b64(read(key)?)}}],
        "contexts": [{"name": "genplane", "context": {"cluster": "genplane", "user": user}}],
        "current-context": "genplane",
    });
    let yaml = serde_saphyr::to_string(&config).context("encoding the kubeconfig")?;
    write(path, &yaml, true)
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
}
