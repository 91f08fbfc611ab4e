//! Tests against an HTTPS conversion webhook served in the test, converting CronTabs between
//! `stable.example.com/v1` (`spec.cronSpec`) and `stable.example.com/v2` (`spec.schedule`).

#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_rustls::rustls;

use super::*;
use genplane_admission::webhook::resolver::ServiceResolver;

const V1: &str = "stable.example.com/v1";
const V2: &str = "stable.example.com/v2";

/// What the test webhook answers to one review.
enum Reply {
    /// 200 with this JSON.
    Json(Value),
    /// This status, content type and body.
    Raw(u16, &'static str, String),
    /// The good answer, after this long.
    Slow(Duration),
}

type Handler = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A CA and a server certificate for 127.0.0.1 signed by it.
struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "conversion webhook test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "converter.crons.svc".to_owned(),
    ])
    .unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

/// An HTTPS webhook on 127.0.0.1, served by a thread of its own (so tests may block their own
/// thread or runtime while calling it). Stops when dropped.
struct TestWebhook {
    url: String,
    ca_pem: String,
    /// Each request's path and query, and its body.
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestWebhook {
    fn start(handler: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> TestWebhook {
        let handler: Handler = Arc::new(handler);
        let pki = pki();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, address) = std::sync::mpsc::channel();
        let server_seen = seen.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
                    rustls::crypto::aws_lc_rs::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![pki.cert_der.into()],
                    rustls::pki_types::PrivatePkcs8KeyDer::from(pki.key_der).into(),
                )
                .unwrap();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let acceptor = acceptor.clone();
                        let handler = handler.clone();
                        let seen = server_seen.clone();
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let service = hyper::service::service_fn(move |request| {
                                answer(request, handler.clone(), seen.clone())
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(tls), service)
                                .await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        let address = address.recv().unwrap();
        TestWebhook {
            url: format!("https://{address}/convert"),
            ca_pem: pki.ca_pem,
            seen,
            _stop: stop,
        }
    }

    /// A `spec.conversion` calling this webhook and trusting its CA.
    fn conversion(&self, review_versions: &[&str]) -> Value {
        conversion_for(&self.url, &self.ca_pem, review_versions)
    }

    fn client(&self) -> ConversionWebhook {
        ConversionWebhook::new(&self.conversion(&["v1", "v1beta1"])).unwrap()
    }

    fn seen(&self) -> Vec<(String, Value)> {
        self.seen.lock().unwrap().clone()
    }
}

fn conversion_for(url: &str, ca_pem: &str, review_versions: &[&str]) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": url,
                "caBundle": data_encoding::BASE64.encode(ca_pem.as_bytes()),
            },
            "conversionReviewVersions": review_versions,
        },
    })
}

async fn answer(
    request: Request<Incoming>,
    handler: Handler,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let target = request
        .uri()
        .path_and_query()
        .map(ToString::to_string)
        .unwrap_or_default();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push((target, review.clone()));
    let (status, content_type, body) = match handler(&review) {
        Reply::Json(value) => (200, "application/json", value.to_string()),
        Reply::Raw(status, content_type, body) => (status, content_type, body),
        Reply::Slow(delay) => {
            tokio::time::sleep(delay).await;
            (
                200,
                "application/json",
                convert_crontabs(&review).to_string(),
            )
        }
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap())
}

/// The correct answer: moves `spec.cronSpec` (v1) to `spec.schedule` (v2) or back.
fn convert_crontabs(review: &Value) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap();
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|object| {
            let mut object = object.clone();
            let spec = object["spec"].as_object_mut().unwrap();
            match desired {
                V2 => {
                    if let Some(value) = spec.remove("cronSpec") {
                        spec.insert("schedule".to_owned(), value);
                    }
                }
                V1 => {
                    if let Some(value) = spec.remove("schedule") {
                        spec.insert("cronSpec".to_owned(), value);
                    }
                }
                other => panic!("unexpected desired version {other}"),
            }
            object["apiVersion"] = json!(desired);
            object
        })
        .collect();
    json!({
        "apiVersion": review["apiVersion"],
        "kind": "ConversionReview",
        "response": {
            "uid": request["uid"],
            "convertedObjects": objects,
            "result": {"status": "Success"},
        },
    })
}

/// The correct answer, then `change` applied to it.
fn tampered(change: impl Fn(&mut Value) + Send + Sync + 'static) -> impl Fn(&Value) -> Reply {
    move |review| {
        let mut answer = convert_crontabs(review);
        change(&mut answer);
        Reply::Json(answer)
    }
}

fn crontab_v1(name: &str, cron: &str) -> Value {
    json!({
        "apiVersion": V1,
        "kind": "CronTab",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": format!("uid-{name}"),
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"app": "cron"},
        },
        "spec": {"cronSpec": cron, "image": "busybox"},
    })
}

fn crontab_v2(name: &str, schedule: &str) -> Value {
    let mut object = crontab_v1(name, "");
    object["apiVersion"] = json!(V2);
    object["spec"] = json!({"schedule": schedule, "image": "busybox"});
    object
}

fn message(error: ConversionError) -> String {
    error.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_reference_reaches_its_server_through_the_resolver() {
    let webhook = TestWebhook::start(|review| Reply::Json(convert_crontabs(review)));
    let address = webhook.url.strip_prefix("https://").unwrap();
    let address = address.strip_suffix("/convert").unwrap();
    let conversion = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {
            "service": {"namespace": "crons", "name": "converter", "port": 8443, "path": "/convert"},
            "caBundle": data_encoding::BASE64.encode(webhook.ca_pem.as_bytes()),
        },
        "conversionReviewVersions": ["v1"],
    }});
    // Through DNS, the name the certificate must carry.
    let dns = ConversionWebhook::new(&conversion).unwrap();
    assert_eq!(
        dns.url(),
        "https://converter.crons.svc:8443/convert?timeout=30s"
    );
    // Overridden to the test's server, whose certificate names converter.crons.svc.
    let resolver =
        ServiceResolver::with_overrides([format!("crons/converter:8443={address}")]).unwrap();
    let client = ConversionWebhook::resolved(&conversion, &resolver).unwrap();
    let v2 = client
        .convert(vec![crontab_v1("a", "*/5 * * * *")], V2)
        .await
        .unwrap();
    assert_eq!(v2, vec![crontab_v2("a", "*/5 * * * *")]);
    assert_eq!(webhook.seen()[0].0, "/convert?timeout=30s");
    // Another Service name is not what the certificate names: refused.
    let other = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {
            "service": {"namespace": "crons", "name": "other", "port": 8443, "path": "/convert"},
            "caBundle": data_encoding::BASE64.encode(webhook.ca_pem.as_bytes()),
        },
        "conversionReviewVersions": ["v1"],
    }});
    let resolver =
        ServiceResolver::with_overrides([format!("crons/other:8443={address}")]).unwrap();
    let error = message(
        ConversionWebhook::resolved(&other, &resolver)
            .unwrap()
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err(),
    );
    assert!(
        error.contains("certificate not valid for name \"other.crons.svc\""),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converts_v1_to_v2_and_back() {
    let webhook = TestWebhook::start(|review| Reply::Json(convert_crontabs(review)));
    let client = webhook.client();
    let original = crontab_v1("a", "*/5 * * * *");

    let v2 = client.convert(vec![original.clone()], V2).await.unwrap();
    assert_eq!(v2, vec![crontab_v2("a", "*/5 * * * *")]);

    let back = client.convert(v2, V1).await.unwrap();
    assert_eq!(back, vec![original]);

    let seen = webhook.seen();
    assert_eq!(seen.len(), 2);
    let (target, review) = &seen[0];
    assert_eq!(target, "/convert?timeout=30s");
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    assert_eq!(review["request"]["desiredAPIVersion"], V2);
    assert_eq!(
        review["request"]["objects"][0]["spec"]["cronSpec"],
        "*/5 * * * *"
    );
    // A fresh uid per request.
    let uid = |i: usize| seen[i].1["request"]["uid"].as_str().unwrap().to_owned();
    assert!(!uid(0).is_empty());
    assert_ne!(uid(0), uid(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_in_the_desired_version_are_not_sent() {
    let webhook = TestWebhook::start(|review| Reply::Json(convert_crontabs(review)));
    let client = webhook.client();

    let converted = client
        .convert(
            vec![
                crontab_v1("a", "1 * * * *"),
                crontab_v2("b", "2 * * * *"),
                crontab_v1("c", "3 * * * *"),
            ],
            V2,
        )
        .await
        .unwrap();
    assert_eq!(
        converted,
        vec![
            crontab_v2("a", "1 * * * *"),
            crontab_v2("b", "2 * * * *"),
            crontab_v2("c", "3 * * * *"),
        ]
    );
    let seen = webhook.seen();
    assert_eq!(seen.len(), 1);
    let names: Vec<&str> = seen[0].1["request"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|object| object["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "c"]);

    // Nothing to convert: no call at all; an object of only apiVersion and kind is converted
    // without the webhook.
    let unchanged = client
        .convert(vec![crontab_v2("b", "2 * * * *")], V2)
        .await
        .unwrap();
    assert_eq!(unchanged, vec![crontab_v2("b", "2 * * * *")]);
    let empty = client
        .convert(vec![json!({"apiVersion": V1, "kind": "CronTab"})], V2)
        .await
        .unwrap();
    assert_eq!(empty, vec![json!({"apiVersion": V2, "kind": "CronTab"})]);
    assert_eq!(
        client.convert(Vec::new(), V2).await.unwrap(),
        Vec::<Value>::new()
    );
    assert_eq!(webhook.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_labels_and_annotations_may_change() {
    let webhook = TestWebhook::start(tampered(|answer| {
        let metadata = &mut answer["response"]["convertedObjects"][0]["metadata"];
        metadata["labels"] = json!({"app": "cron", "converted": "yes"});
        metadata["annotations"] = json!({"example.com/by": "webhook"});
        metadata["resourceVersion"] = json!("999");
        metadata["generation"] = json!(5);
        metadata["finalizers"] = json!(["example.com/x"]);
    }));
    let converted = webhook
        .client()
        .convert(vec![crontab_v1("a", "* * * * *")], V2)
        .await
        .unwrap();
    let metadata = &converted[0]["metadata"];
    assert_eq!(
        metadata["labels"],
        json!({"app": "cron", "converted": "yes"})
    );
    assert_eq!(
        metadata["annotations"],
        json!({"example.com/by": "webhook"})
    );
    assert_eq!(metadata["resourceVersion"], "7");
    assert_eq!(metadata["generation"], 2);
    assert!(metadata.get("finalizers").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_removed_by_the_webhook_are_removed() {
    let webhook = TestWebhook::start(tampered(|answer| {
        let metadata = answer["response"]["convertedObjects"][0]["metadata"]
            .as_object_mut()
            .unwrap();
        metadata.remove("labels");
    }));
    let converted = webhook
        .client()
        .convert(vec![crontab_v1("a", "* * * * *")], V2)
        .await
        .unwrap();
    assert!(converted[0]["metadata"].get("labels").is_none());
    assert_eq!(converted[0]["metadata"]["name"], "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_result_returns_the_webhooks_message() {
    let webhook = TestWebhook::start(|review| {
        Reply::Json(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {
                "uid": review["request"]["uid"],
                "result": {"status": "Failure", "message": "cronSpec \"x\" is not valid"},
            },
        }))
    });
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: cronSpec \"x\" is not valid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_without_message_names_the_status() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["result"] = json!({"status": "Failure"});
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: response.result.status was 'Failure', not 'Success'"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_uid_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["uid"] = json!("not-the-request");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    let uid = webhook.seen()[0].1["request"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        message(error),
        format!(
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected response.uid=\"{uid}\", got \"not-the-request\""
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_review_is_sent_when_only_v1beta1_is_listed() {
    // v1beta1 answers were never checked for their uid, upstream or here.
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["uid"] = json!("whatever");
    }));
    let client = ConversionWebhook::new(&webhook.conversion(&["v1beta2", "v1beta1"])).unwrap();
    assert_eq!(client.review_version(), "v1beta1");
    let converted = client
        .convert(vec![crontab_v1("a", "* * * * *")], V2)
        .await
        .unwrap();
    assert_eq!(converted, vec![crontab_v2("a", "* * * * *")]);
    assert_eq!(
        webhook.seen()[0].1["apiVersion"],
        "apiextensions.k8s.io/v1beta1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_another_version_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1beta1, Kind=ConversionReview"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_response_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer.as_object_mut().unwrap().remove("response");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: no response provided"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_count_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["convertedObjects"]
            .as_array_mut()
            .unwrap()
            .pop();
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x"), crontab_v1("b", "y")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion for stable.example.com/v1, Kind=CronTab returned 1 objects, expected 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_version_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["convertedObjects"][1]["apiVersion"] = json!("stable.example.com/v3");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x"), crontab_v1("b", "y")], V2)
        .await
        .unwrap_err();
    // Upstream counts the objects from 1 in these messages.
    assert_eq!(
        message(error),
        "conversion for stable.example.com/v1, Kind=CronTab returned invalid converted object at index 2: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v3)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_kind_is_rejected() {
    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["convertedObjects"][0]["kind"] = json!("AtJob");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion for stable.example.com/v1, Kind=CronTab returned invalid converted object at index 1: invalid kind (expected CronTab, received AtJob)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_name_namespace_or_uid_is_rejected() {
    for (field, value, expected) in [
        ("name", "b", "must have the same name: a != b"),
        (
            "namespace",
            "other",
            "must have the same namespace: default != other",
        ),
        ("uid", "uid-z", "must have the same UID: uid-a != uid-z"),
    ] {
        let webhook = TestWebhook::start(tampered(move |answer| {
            answer["response"]["convertedObjects"][0]["metadata"][field] = json!(value);
        }));
        let error = webhook
            .client()
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err();
        assert_eq!(
            message(error),
            format!(
                "conversion for stable.example.com/v1, Kind=CronTab returned invalid converted object at index 1: {expected}"
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_metadata_from_the_webhook_is_rejected() {
    for (change, expected) in [
        (
            json!({"labels": {"bad key!": "x"}}),
            "metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters",
        ),
        (
            json!({"labels": {"app": 3}}),
            "metadata.labels[app] must be a string, but is int64 in converted object",
        ),
        (
            json!({"annotations": "text"}),
            "invalid metadata.annotations of type string in converted object",
        ),
    ] {
        let webhook = TestWebhook::start(tampered(move |answer| {
            let metadata = &mut answer["response"]["convertedObjects"][0]["metadata"];
            for (key, value) in change.as_object().unwrap() {
                metadata[key] = value.clone();
            }
        }));
        let error = webhook
            .client()
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err();
        let error = message(error);
        assert!(
            error.starts_with(&format!(
                "conversion for stable.example.com/v1, Kind=CronTab returned invalid metadata in object at index 1: {expected}"
            )),
            "{error}"
        );
    }

    let webhook = TestWebhook::start(tampered(|answer| {
        answer["response"]["convertedObjects"][0]
            .as_object_mut()
            .unwrap()
            .remove("metadata");
    }));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    // Without metadata the name no longer matches, which upstream checks first.
    assert_eq!(
        message(error),
        "conversion for stable.example.com/v1, Kind=CronTab returned invalid converted object at index 1: must have the same name: a != "
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_read_as_client_go_words_them() {
    let webhook = TestWebhook::start(|_| Reply::Raw(500, "text/plain", "boom\n".to_owned()));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: an error on the server (\"boom\") has prevented the request from succeeding"
    );

    let webhook = TestWebhook::start(|_| {
        Reply::Raw(
            403,
            "application/json",
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "go away", "code": 403})
                .to_string(),
        )
    });
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: go away"
    );

    let webhook = TestWebhook::start(|_| Reply::Raw(404, "text/plain", "no".to_owned()));
    let error = webhook
        .client()
        .convert(vec![crontab_v1("a", "x")], V2)
        .await
        .unwrap_err();
    assert_eq!(
        message(error),
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: the server could not find the requested resource"
    );

    let webhook =
        TestWebhook::start(|_| Reply::Raw(200, "application/json", "{not json".to_owned()));
    let error = message(
        webhook
            .client()
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err(),
    );
    assert!(
        error.starts_with(
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: couldn't get version/kind; json parse error: "
        ),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_url_fails() {
    // A port that was free a moment ago and has no listener now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pki = pki();
    let url = format!("https://127.0.0.1:{port}/convert");
    let client = ConversionWebhook::new(&conversion_for(&url, &pki.ca_pem, &["v1"])).unwrap();
    let error = message(
        client
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err(),
    );
    let prefix = format!(
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": "
    );
    assert!(error.starts_with(&prefix), "{error}");
    assert!(
        error.ends_with("tcp connect error: Connection refused (os error 111)"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_webhook_times_out() {
    let webhook = TestWebhook::start(|_| Reply::Slow(Duration::from_secs(5)));
    let client = webhook.client().with_timeout(Duration::from_millis(300));
    assert_eq!(client.timeout(), Duration::from_millis(300));
    let started = Instant::now();
    let error = message(
        client
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err(),
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error,
        format!(
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"{}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            webhook.url.replace("/convert", "/convert?timeout=300ms")
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_bundle_fails_the_tls_handshake() {
    let webhook = TestWebhook::start(|review| Reply::Json(convert_crontabs(review)));
    let other_ca = pki().ca_pem;
    let client = ConversionWebhook::new(&conversion_for(&webhook.url, &other_ca, &["v1"])).unwrap();
    let error = message(
        client
            .convert(vec![crontab_v1("a", "x")], V2)
            .await
            .unwrap_err(),
    );
    assert!(
        error.starts_with(
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://127.0.0.1:"
        ),
        "{error}"
    );
    assert!(error.contains("invalid peer certificate"), "{error}");
    assert!(webhook.seen().is_empty());
}

#[test]
fn the_webhook_configuration_is_checked() {
    let pki = pki();
    let error = |conversion: Value| ConversionWebhook::new(&conversion).unwrap_err().to_string();

    assert_eq!(
        error(json!({"strategy": "None"})),
        "conversion strategy is \"None\", not \"Webhook\""
    );
    assert_eq!(
        error(json!({"strategy": "Webhook"})),
        "spec.conversion.webhook is required when spec.conversion.strategy is \"Webhook\""
    );
    assert_eq!(
        error(json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": "crons", "name": "converter", "port": 443}},
            "conversionReviewVersions": ["v9"],
        }})),
        "no supported conversion review versions",
        "a service reference passes, to be resolved"
    );
    assert_eq!(
        error(json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": "crons", "name": "converter", "port": 0}},
            "conversionReviewVersions": ["v1"],
        }})),
        "conversion webhook service: service reference port 0 is not in 1..65535"
    );
    assert_eq!(
        error(json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {}, "conversionReviewVersions": ["v1"],
        }})),
        "webhook configuration must have either service or URL"
    );
    assert_eq!(
        error(conversion_for(
            "http://127.0.0.1:1/convert",
            &pki.ca_pem,
            &["v1"]
        )),
        "conversion webhook URL \"http://127.0.0.1:1/convert\" must use the https scheme"
    );
    assert!(
        error(conversion_for("https://[::1/convert", &pki.ca_pem, &["v1"]))
            .starts_with("Unparsable URL: ")
    );
    assert_eq!(
        error(conversion_for(
            "https://127.0.0.1:1/convert",
            &pki.ca_pem,
            &["v2"]
        )),
        "no supported conversion review versions"
    );
    assert_eq!(
        error(json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:1/", "caBundle": "%%%%"},
            "conversionReviewVersions": ["v1"],
        }})),
        "unable to load root certificates: caBundle is not base64: invalid symbol at 0"
    );
    assert_eq!(
        error(json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:1/", "caBundle": data_encoding::BASE64.encode(b"not pem")},
            "conversionReviewVersions": ["v1"],
        }})),
        "unable to load root certificates: unable to parse bytes as PEM block"
    );

    // The first supported version listed wins, as upstream picks.
    let pick = |versions: &[&str]| {
        ConversionWebhook::new(&conversion_for(
            "https://127.0.0.1:1/c",
            &pki.ca_pem,
            versions,
        ))
        .unwrap()
        .review_version()
    };
    assert_eq!(pick(&["v1", "v1beta1"]), "v1");
    assert_eq!(pick(&["v1beta1", "v1"]), "v1beta1");
    assert_eq!(pick(&["v2", "v1"]), "v1");

    // No caBundle: the system roots; a query in the URL is dropped as client-go drops it.
    let system = ConversionWebhook::new(&json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://webhook.example.com/convert?x=1"},
        "conversionReviewVersions": ["v1"],
    }}))
    .unwrap();
    assert_eq!(
        system.url(),
        "https://webhook.example.com/convert?timeout=30s"
    );
}

/// Not a pass/fail test: prints the cost of one conversion call on loopback. Run with
/// `cargo nextest run -p genplane-controlplane measure_conversion_calls --run-ignored only
/// --no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, run by hand"]
async fn measure_conversion_calls() {
    let webhook = TestWebhook::start(|review| Reply::Json(convert_crontabs(review)));
    let client = webhook.client();
    let objects: Vec<Value> = (0..10)
        .map(|i| crontab_v1(&format!("c{i}"), "* * * * *"))
        .collect();
    let rounds = 500u32;
    for (label, batch) in [("1 object", 1usize), ("10 objects", 10)] {
        client.convert(objects[..batch].to_vec(), V2).await.unwrap();
        let started = Instant::now();
        for _ in 0..rounds {
            let converted = client.convert(objects[..batch].to_vec(), V2).await.unwrap();
            assert_eq!(converted.len(), batch);
        }
        println!(
            "async convert, {label}: {:?} per call",
            started.elapsed() / rounds
        );
    }
}
