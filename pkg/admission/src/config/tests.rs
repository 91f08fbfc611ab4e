#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn admission_config(dir: &Path, plugins: &str) -> PathBuf {
    write(
        dir,
        "admission.yaml",
        &format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{plugins}"
        ),
    )
}

fn error_of(path: &Path) -> String {
    Configuration::load(path).unwrap_err().to_string()
}

#[test]
fn webhook_credentials_are_picked_by_host_as_upstream_picks_them() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "token", "from-a-file\n");
    let kubeconfig = write(
        dir.path(),
        "webhooks.kubeconfig",
        r#"apiVersion: v1
kind: Config
users:
- name: exact.example.com:8443
  user: {token: exact}
- name: '*.example.com'
  user: {tokenFile: token}
- name: plain.example.org
  user: {username: admin, password: secret}
- name: '*'
  user: {token: fallback}
"#,
    );
    let path = admission_config(
        dir.path(),
        &format!(
            "- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        ),
    );
    let configuration = Configuration::load(&path).unwrap();
    assert!(configuration.mutating_webhook.is_none());
    let credentials = configuration.validating_webhook.unwrap();
    let authorization = |host: &str| {
        credentials
            .for_host(host)
            .and_then(|c| c.authorization.clone())
            .unwrap()
    };
    assert_eq!(authorization("exact.example.com:8443"), "Bearer exact");
    // a wildcard of a domain suffix, with or without a port
    assert_eq!(authorization("exact.example.com"), "Bearer from-a-file");
    assert_eq!(authorization("a.b.example.com:9443"), "Bearer fallback");
    assert_eq!(authorization("a.b.example.com"), "Bearer from-a-file");
    // an explicit :443 also matches the bare host
    assert_eq!(
        authorization("plain.example.org:443"),
        format!("Basic {}", data_encoding::BASE64.encode(b"admin:secret"))
    );
    assert_eq!(authorization("elsewhere.test"), "Bearer fallback");
    // secrets stay out of logs
    assert!(!format!("{credentials:?}").contains("exact\""));
    assert!(!format!("{:?}", credentials.for_host("x")).contains("fallback"));
}

#[test]
fn plugin_configurations_may_be_files_beside_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "quota.yaml",
        r#"apiVersion: apiserver.config.k8s.io/v1
kind: ResourceQuotaConfiguration
limitedResources:
- resource: configmaps
  matchContains: [configmaps]
- apiGroup: example.com
  resource: widgets
  matchContains: [widgets]
  matchScopes: [{scopeName: PriorityClass, operator: In, values: [high]}]
"#,
    );
    let path = admission_config(
        dir.path(),
        "- name: ResourceQuota\n  path: quota.yaml\n- name: NamespaceLifecycle\n  configuration: {}\n",
    );
    let configuration = Configuration::load(&path).unwrap();
    let quota = &configuration.quota;
    assert_eq!(quota.limited_resources.len(), 2);
    let names = |group: &str, resource: &str| {
        genplane_api::core::resourcequota::object_count_names(group, resource)
    };
    assert_eq!(
        quota.limited_names("", "configmaps", &names("", "configmaps")),
        vec!["configmaps".to_owned(), "count/configmaps".to_owned()]
    );
    assert_eq!(
        quota.limited_names("example.com", "widgets", &names("example.com", "widgets")),
        vec!["count/widgets.example.com".to_owned()]
    );
    assert!(
        quota
            .limited_names("", "secrets", &names("", "secrets"))
            .is_empty()
    );
}

#[test]
fn bad_configurations_are_refused_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let webhook = |file: &str| {
        format!(
            "- name: MutatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {file}\n"
        )
    };
    let path = admission_config(dir.path(), &webhook("relative.kubeconfig"));
    assert!(
        error_of(&path)
            .contains("kubeConfigFile \"relative.kubeconfig\" must be an absolute file path"),
        "{}",
        error_of(&path)
    );
    let exec = write(
        dir.path(),
        "exec.kubeconfig",
        "users:\n- name: '*'\n  user: {exec: {command: get-token}}\n",
    );
    let path = admission_config(dir.path(), &webhook(&exec.display().to_string()));
    assert!(
        error_of(&path).contains("user \"*\": exec is not supported"),
        "{}",
        error_of(&path)
    );
    let half = write(
        dir.path(),
        "half.kubeconfig",
        "users:\n- name: '*'\n  user: {client-key-data: aGVsbG8=}\n",
    );
    let path = admission_config(dir.path(), &webhook(&half.display().to_string()));
    assert!(
        error_of(&path).contains("client-key without client-certificate"),
        "{}",
        error_of(&path)
    );
    let path = admission_config(
        dir.path(),
        "- name: ResourceQuota\n  configuration: {apiVersion: v1, kind: ConfigMap}\n",
    );
    assert!(
        error_of(&path)
            .contains("expected one of apiserver.config.k8s.io/v1 ResourceQuotaConfiguration"),
        "{}",
        error_of(&path)
    );
    let path = write(
        dir.path(),
        "wrong.yaml",
        "apiVersion: v1\nkind: ConfigMap\n",
    );
    assert!(error_of(&path).contains("expected an AdmissionConfiguration"));
    let path = admission_config(dir.path(), "- name: ResourceQuota\n  path: missing.yaml\n");
    assert!(
        error_of(&path).contains("missing.yaml"),
        "{}",
        error_of(&path)
    );
    let path = admission_config(
        dir.path(),
        "- name: ResourceQuota\n  configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: ResourceQuotaConfiguration, limitedResources: [{matchContains: [x]}]}\n",
    );
    assert!(
        error_of(&path).contains("limitedResources"),
        "{}",
        error_of(&path)
    );
}

#[test]
fn a_client_certificate_from_files_or_data_is_presented_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = rcgen::CertificateParams::new(vec!["apiserver".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    write(dir.path(), "client.crt", &certificate.pem());
    write(dir.path(), "client.key", &key.serialize_pem());
    let kubeconfig = write(
        dir.path(),
        "webhooks.kubeconfig",
        &format!(
            "users:\n- name: files.example.com\n  user: {{client-certificate: client.crt, client-key: client.key}}\n- name: data.example.com\n  user: {{client-certificate-data: {}, client-key-data: {}, token: both}}\n",
            data_encoding::BASE64.encode(certificate.pem().as_bytes()),
            data_encoding::BASE64.encode(key.serialize_pem().as_bytes()),
        ),
    );
    let credentials = WebhookCredentials::from_kubeconfig(&kubeconfig).unwrap();
    let files = credentials.for_host("files.example.com").unwrap();
    assert!(files.identity.as_deref().unwrap().contains("PRIVATE KEY"));
    assert!(files.authorization.is_none());
    let data = credentials.for_host("data.example.com:443").unwrap();
    assert_eq!(data.identity, files.identity);
    assert_eq!(data.authorization.as_deref(), Some("Bearer both"));
    assert!(credentials.for_host("elsewhere.example.com").is_none());
}
