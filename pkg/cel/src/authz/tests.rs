use super::*;
use crate::{Activation, Environment, VarType};
use genplane_apimachinery::validation::field::Path;
use std::sync::Mutex;

/// Allows only `delete` of configmaps in `team`, and remembers what it was asked.
#[derive(Debug, Default)]
struct Recording(Mutex<Vec<Check>>);

impl Checker for Recording {
    fn check(&self, check: &Check) -> Answer {
        self.0.lock().unwrap().push(check.clone());
        let allowed = check.verb == "delete"
            && matches!(&check.target, Target::Resource { resource, namespace, .. }
                if resource == "configmaps" && namespace == "team");
        Answer {
            allowed,
            reason: if allowed {
                "RBAC: allowed".into()
            } else {
                String::new()
            },
            error: None,
        }
    }
}

/// A write of the ConfigMap `team/a`.
fn request() -> Option<Target> {
    Some(Target::Resource {
        group: String::new(),
        resource: "configmaps".into(),
        subresource: String::new(),
        namespace: "team".into(),
        name: "a".into(),
    })
}

#[test]
fn checks_ask_the_authorizer_with_what_the_expression_built() {
    let recording = Arc::new(Recording::default());
    let env = Environment::new().variable("authorizer", VarType::Dyn);
    let run = |expression: &str| {
        let program = env.compile(expression, &Path::new("x")).unwrap();
        let activation =
            Activation::new().bind_value("authorizer", value(recording.clone(), request()));
        program.evaluate(&activation).unwrap()
    };
    assert_eq!(
        run(
            "authorizer.group('').resource('configmaps').namespace('team').name('a').check('delete').allowed()"
        ),
        Value::Bool(true)
    );
    assert_eq!(
        run(
            "authorizer.group('').resource('configmaps').namespace('team').check('delete').reason()"
        ),
        Value::String(Arc::new("RBAC: allowed".into()))
    );
    assert_eq!(
        run(
            "authorizer.serviceAccount('ns', 'sa').group('apps').resource('deployments').subresource('scale').check('update').allowed()"
        ),
        Value::Bool(false)
    );
    assert_eq!(
        run("authorizer.path('/healthz').check('get').errored()"),
        Value::Bool(false)
    );
    assert_eq!(
        run("authorizer.requestResource.check('delete').allowed()"),
        Value::Bool(true)
    );
    let asked = recording.0.lock().unwrap().clone();
    assert_eq!(
        asked[2],
        Check {
            service_account: Some(("ns".into(), "sa".into())),
            verb: "update".into(),
            target: Target::Resource {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                namespace: String::new(),
                name: String::new(),
            },
        }
    );
    assert_eq!(
        asked[3],
        Check {
            service_account: None,
            verb: "get".into(),
            target: Target::Path("/healthz".into()),
        }
    );
    // a method of the library on something else has no overload
    let program = env.compile("'x'.check('get')", &Path::new("x")).unwrap();
    let activation = Activation::new().bind_value("authorizer", value(recording.clone(), None));
    assert!(program.evaluate(&activation).is_err());
}
