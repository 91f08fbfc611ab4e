//! The `authorizer` variable of admission expressions, as Kubernetes' CEL authorization
//! library has it: a [`Checker`] (the server's authorizer) bound to the request's user becomes a CEL value
//! ([`value`]) whose checks ask it:
//!
//! ```text
//! authorizer.group('').resource('configmaps').namespace('ns').name('n').check('delete').allowed()
//! authorizer.group('apps').resource('deployments').subresource('scale').check('update').reason()
//! authorizer.path('/healthz').check('get').allowed()
//! authorizer.serviceAccount('ns', 'sa').group('')...   (the service account asks instead)
//! authorizer.requestResource.check('update')            (the resource the request writes)
//! decision.allowed() / .reason() / .errored() / .error()
//! ```
//!
//! The library's values are opaque to everything else (`type()` says `dyn`); a method of one
//! on anything else has no overload.

use std::fmt;
use std::sync::Arc;

use kube_cel::cel::objects::{Opaque, Value};
use kube_cel::cel::{Context, ExecutionError, FunctionContext};

/// What a check asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A non-resource path.
    Path(String),
    /// A resource (`group` empty for the core group), its subresource, namespace and name
    /// (each empty when not given).
    Resource {
        /// The API group.
        group: String,
        /// The resource (plural).
        resource: String,
        /// The subresource.
        subresource: String,
        /// The namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
}

/// One authorization check an expression makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// `Some((namespace, name))` when the check is for that service account
    /// (`authorizer.serviceAccount(...)`), `None` for the request's user.
    pub service_account: Option<(String, String)>,
    /// The verb.
    pub verb: String,
    /// What is checked.
    pub target: Target,
}

/// The answer to a check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Whether the principal may.
    pub allowed: bool,
    /// Why (may be empty).
    pub reason: String,
    /// Why the check could not be made, if it could not.
    pub error: Option<String>,
}

/// What answers the checks: the server's authorizer for the request's user.
pub trait Checker: Send + Sync + fmt::Debug {
    /// Answers `check`.
    fn check(&self, check: &Check) -> Answer;
}

/// The authorizer, with pointer equality (CEL values must compare).
#[derive(Clone, Debug)]
struct Shared(Arc<dyn Checker>);

impl PartialEq for Shared {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Shared {}

/// `authorizer` (or `authorizer.serviceAccount(...)`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct AuthorizerValue {
    authorizer: Shared,
    service_account: Option<(String, String)>,
    /// What `authorizer.requestResource` checks: the request's resource (a
    /// [`Target::Resource`]).
    request_resource: Option<Arc<Target>>,
}

/// `authorizer.path(p)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PathCheck {
    base: AuthorizerValue,
    path: String,
}

/// `authorizer.group(g)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupCheck {
    base: AuthorizerValue,
    group: String,
}

/// `authorizer.group(g).resource(r)...`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ResourceCheck {
    base: AuthorizerValue,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

/// The result of `.check(verb)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DecisionValue(Answer);

macro_rules! opaque {
    ($($ty:ident => $name:literal),* $(,)?) => {
        $(impl Opaque for $ty {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        })*
    };
}

opaque!(
    AuthorizerValue => "kubernetes.authorization.Authorizer",
    PathCheck => "kubernetes.authorization.PathCheck",
    GroupCheck => "kubernetes.authorization.GroupCheck",
    ResourceCheck => "kubernetes.authorization.ResourceCheck",
    DecisionValue => "kubernetes.authorization.Decision",
);

/// The CEL value of `authorizer` answering with `authorizer`; `request_resource` (a
/// [`Target::Resource`]) is what `authorizer.requestResource` checks.
pub fn value(authorizer: Arc<dyn Checker>, request_resource: Option<Target>) -> Value {
    Value::Opaque(Arc::new(AuthorizerValue {
        authorizer: Shared(authorizer),
        service_account: None,
        request_resource: request_resource.map(Arc::new),
    }))
}

/// Adds the library's functions to a root context.
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function("path", path);
    ctx.add_function("group", group);
    ctx.add_function("serviceAccount", service_account);
    ctx.add_function("requestResource", request_resource);
    ctx.add_function("resource", resource);
    ctx.add_function("subresource", |ftx: &FunctionContext<'_, '_>| {
        refine(ftx, |check, value| check.subresource = value)
    });
    ctx.add_function("namespace", |ftx: &FunctionContext<'_, '_>| {
        refine(ftx, |check, value| check.namespace = value)
    });
    ctx.add_function("name", |ftx: &FunctionContext<'_, '_>| {
        refine(ftx, |check, value| check.name = value)
    });
    ctx.add_function("check", check);
    ctx.add_function("allowed", |ftx: &FunctionContext<'_, '_>| {
        decision(ftx).map(|d| Value::Bool(d.allowed))
    });
    ctx.add_function("reason", |ftx: &FunctionContext<'_, '_>| {
        decision(ftx).map(|d| Value::String(Arc::new(d.reason)))
    });
    ctx.add_function("errored", |ftx: &FunctionContext<'_, '_>| {
        decision(ftx).map(|d| Value::Bool(d.error.is_some()))
    });
    ctx.add_function("error", |ftx: &FunctionContext<'_, '_>| {
        decision(ftx).map(|d| Value::String(Arc::new(d.error.unwrap_or_default())))
    });
}

/// The receiver of a method call, as `T`.
fn this<T: Clone + 'static>(ftx: &FunctionContext<'_, '_>) -> Result<T, ExecutionError> {
    match &ftx.this {
        Some(Value::Opaque(o)) => o
            .downcast_ref::<T>()
            .cloned()
            .ok_or(ExecutionError::NoSuchOverload),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// Argument `i` of a call, a string.
fn string_arg(ftx: &FunctionContext<'_, '_>, i: usize) -> Result<String, ExecutionError> {
    let arg = ftx.args.get(i).ok_or(ExecutionError::NoSuchOverload)?;
    match Value::resolve(arg, ftx.ptx)? {
        Value::String(s) => Ok(s.to_string()),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn path(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let base: AuthorizerValue = this(ftx)?;
    Ok(Value::Opaque(Arc::new(PathCheck {
        base,
        path: string_arg(ftx, 0)?,
    })))
}

fn group(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let base: AuthorizerValue = this(ftx)?;
    Ok(Value::Opaque(Arc::new(GroupCheck {
        base,
        group: string_arg(ftx, 0)?,
    })))
}

fn service_account(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let base: AuthorizerValue = this(ftx)?;
    Ok(Value::Opaque(Arc::new(AuthorizerValue {
        authorizer: base.authorizer,
        service_account: Some((string_arg(ftx, 0)?, string_arg(ftx, 1)?)),
        request_resource: base.request_resource,
    })))
}

/// `authorizer.requestResource` (rewritten to a call): a resource check of the request's
/// resource.
fn request_resource(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let base: AuthorizerValue = this(ftx)?;
    let Some(Target::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
    }) = base.request_resource.as_deref().cloned()
    else {
        return Err(ftx.error("the request has no resource"));
    };
    Ok(Value::Opaque(Arc::new(ResourceCheck {
        base,
        group,
        resource,
        subresource,
        namespace,
        name,
    })))
}

fn resource(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let group: GroupCheck = this(ftx)?;
    Ok(Value::Opaque(Arc::new(ResourceCheck {
        base: group.base,
        group: group.group,
        resource: string_arg(ftx, 0)?,
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
    })))
}

/// A resource check with one more part set by `set`.
fn refine(
    ftx: &FunctionContext<'_, '_>,
    set: impl Fn(&mut ResourceCheck, String),
) -> Result<Value, ExecutionError> {
    let mut check: ResourceCheck = this(ftx)?;
    set(&mut check, string_arg(ftx, 0)?);
    Ok(Value::Opaque(Arc::new(check)))
}

fn check(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let verb = string_arg(ftx, 0)?;
    let (base, target) = if let Ok(p) = this::<PathCheck>(ftx) {
        (p.base, Target::Path(p.path))
    } else {
        let r: ResourceCheck = this(ftx)?;
        (
            r.base,
            Target::Resource {
                group: r.group,
                resource: r.resource,
                subresource: r.subresource,
                namespace: r.namespace,
                name: r.name,
            },
        )
    };
    let decision = base.authorizer.0.check(&Check {
        service_account: base.service_account,
        verb,
        target,
    });
    Ok(Value::Opaque(Arc::new(DecisionValue(decision))))
}

fn decision(ftx: &FunctionContext<'_, '_>) -> Result<Answer, ExecutionError> {
    this::<DecisionValue>(ftx).map(|d| d.0)
}

#[cfg(test)]
mod tests;
