//! CEL for the API server: any expression over declared variables ([`Environment`],
//! [`Program`]: admission policies' `object`, `request`, `params`, ... as dynamic values or
//! typed by a schema), and on top of it the validation rules of an OpenAPI v3 schema ([`Rules`]:
//! the `x-kubernetes-validations` of a CustomResourceDefinition version, compiled once and run
//! against objects).
//!
//! ```text
//! let env = Environment::new().variable("object", VarType::Dyn).variable("request", VarType::Dyn);
//! let program = env.compile("request.operation == 'CREATE'", &path)?;  // Error::Compile at path
//! let result = program.evaluate(&Activation::new().bind("object", &obj).bind("request", &req))?;
//! ```
//!
//! ```text
//! let (rules, errs) = Rules::compile(&schema, &Path::new("spec").child("versions").index(0)
//!     .child("schema").child("openAPIV3Schema"));   // errs: reject the CRD
//! if !rules.is_empty() { let errs = rules.validate(&new, old.as_ref()); }
//! ```
//!
//! Follows Kubernetes 1.33 (`apiextensions-apiserver` `schema/cel`): rules run at every node of
//! the object they are declared on (and in `allOf` branches), `self` typed by the schema
//! (integers, numbers, strings with `date`/`date-time`/`duration`/`byte` formats as timestamps,
//! durations and bytes, maps vs objects with escaped property names, only `apiVersion`, `kind`,
//! `metadata.name` and `metadata.generateName` at a resource root, set and map lists equal
//! regardless of order); transition rules (`oldSelf`, `optionalOldSelf`) only where the old
//! value correlates (same property, same map key, same key of a `list-type: map` item); errors
//! with upstream's paths and wording; `message`, `messageExpression`, `reason` and `fieldPath`;
//! upstream's static cost limits at compile time and a runtime cost budget; and ratcheting.
//!
//! The Kubernetes CEL libraries (strings, lists, sets, regex, urls, ip/cidr, quantity, semver,
//! format, ...) come from the `kube-cel` crate, the CEL interpreter from its re-exported `cel`.
//!
//! [`fuzzing::exercise`] is the entry point fuzzers of rule compilation and evaluation share.
//!
//! # Limits
//!
//! A rule or messageExpression is checked before the parser sees it, in one linear pass over
//! its tokens (lexed as CEL's lexer does, so brackets in string literals do not count); over a
//! limit, the CRD is refused with `compilation failed: ERROR: <input>:-1:0: <limit>` at the
//! field (`...x-kubernetes-validations[0].rule` or `.messageExpression`):
//!
//! | limit | here | upstream |
//! |---|---|---|
//! | size | [`MAX_EXPRESSION_CODE_POINTS`] = 100,000 code points | the same: cel-go's parser default `expressionSizeCodePointLimit` |
//! | nesting: brackets, calls, indexes, conditionals open at once | [`MAX_NESTING_DEPTH`] = 64 | 250: cel-go's `maxRecursionDepth`, per grammar rule |
//! | recursion: nesting plus operator chains (`1 + 1 + ...`, `a.b.c...`) along a path; `&&`/`\|\|` count as the balanced trees they become | [`MAX_RECURSION_DEPTH`] = 250 | 250: cel-go's `maxRecursionDepth` in its visitor |
//! | depth of the tree after macro expansion (a second line) | [`MAX_TREE_DEPTH`] = 500 | none |
//!
//! Kubernetes sets none of these itself (its CEL environment keeps cel-go's defaults). The
//! nesting limit is lower than cel-go's because the `cel` crate's generated parser needs about
//! 180 KiB of stack per level in a debug build. Parsing, evaluation and the walks of a rule run
//! on the caller's stack when enough of it is left, else on a segment sized for the rule's
//! depth (`stacker`), so that rules at the limits run on a 2 MiB tokio worker in a debug build;
//! a panic of the parser or the interpreter is caught and reported as an error of the rule.
//!
//! # Known differences from upstream
//!
//! - No static type checker (the `cel` crate has none): only undeclared identifiers, undefined
//!   fields of `self`, message constructions (`Foo{a: 1}`: no message types are declared),
//!   and results that surely are not booleans (rules) or strings (messageExpressions) are
//!   compile errors; other type errors surface when the rule runs.
//! - Costs follow cel-go's estimator in shape and factors, not to the unit. At run time the
//!   same estimate on the actual sizes of the values is charged before the rule runs, and the
//!   evaluation is counted while it runs ([`cost`]: every iteration, and what large builders
//!   build) and cancelled past the limit, or after a second (the interpreter's copies).
//! - The bad value of a compile error is the rule as JSON (upstream prints a Go struct).
//! - Missing from the `cel` crate 0.13: `cel.bind`, `sortBy`, two-variable comprehensions;
//!   such rules fail when they run.
//! - The `cel` crate's parser reads any even run of `!` or `-` as one operator (`!!x` as
//!   `!x`); runs are reduced before parsing as cel-go reduces them (`!!x` is `x`, `!!!x` is
//!   `!x`, `--1` is `1`).
//!
//! # The optional library
//!
//! Kubernetes enables cel-go's optional library. Supported: `optional.of`, `optional.none`,
//! `optional.ofNonZeroValue`, `.hasValue()`, `.value()`, `.or()` and `.orValue()` (evaluating
//! their argument only when the receiver is empty, as cel-go), the `optMap` and `optFlatMap`
//! macros (`oldSelf.optMap(o, o == self).orValue(true)` with `optionalOldSelf`), optional
//! selection `x.?f` (chains `x.?a.?b` included) and indexing `l[?0]`, `m[?k]`, optional
//! entries `{?k: v}` and elements `[?x]`, `optional.unwrap(l)` / `l.unwrapOpt()`, and lists'
//! `first()` / `last()` (kube-cel). Still missing or different:
//! - No `optional(T)` typing: `[?1]`, `{?k: 1}` or `self.?a + 1` are not compile errors (the
//!   plain value is used or the rule fails when it runs); `.?f` on a value that is not a map or
//!   object fails when it runs; `type(x)` of an optional is `dyn`, and `optional_type` is not
//!   declared.
//! - Optionals do not compare: `optional.of(1) == optional.of(1)` is false.
//! - The `cel` crate unwraps an optional copied into a list, a map or a comprehension
//!   variable: `[optional.of(1)].all(x, x.hasValue())` fails when it runs.

#![warn(missing_docs)]

mod analyze;
pub mod authz;
mod compiler;
pub mod cost;
mod direct;
pub mod fuzzing;
mod optional;
mod parse;
mod projection;
mod rewrite;
mod rule;
mod schema;
mod source;
mod stack;
mod types;
mod value;

pub use compiler::{
    Activation, CelValue, Environment, Error, ObjectType, Prepared, Program, VarType, map_value,
    to_json,
};
pub use cost::{Budget, Inline};
pub use direct::{Direct, DirectVars};
pub use parse::MAX_TREE_DEPTH;
pub use projection::Reach;
pub use source::{MAX_EXPRESSION_CODE_POINTS, MAX_NESTING_DEPTH, MAX_RECURSION_DEPTH};

use std::sync::Arc;

use genplane_apimachinery::validation::field::{self, ErrorList, ErrorType, Path};
use kube_cel::cel::objects::{OptionalValue, Value as Cel};
use kube_cel::cel::{Context, ExecutionError};
use serde_json::Value;

use crate::analyze::Ty;
use crate::compiler::go_error;
use crate::projection::Projection;
use crate::rule::{CompiledRule, CostContribution, cost_error_message};
use crate::schema::{ListType, Node};

/// Upstream's limit on the total estimated cost of every rule of one schema.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// Upstream's limit on the estimated cost of one rule (times how often it can run).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = rule::STATIC_ESTIMATED_COST_LIMIT;
/// Upstream's limit on the cost of one evaluation of one rule.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Upstream's cost budget for all rules of one object.
pub const RUNTIME_CEL_COST_BUDGET: i64 = 10_000_000;
/// Upstream's limit on the length of a message produced by `messageExpression`.
pub const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES: usize = 5 * 1024;

/// Every rule of one schema, compiled. Cheap to share (`Arc`) and to run concurrently.
pub struct Rules {
    root: Option<(Node, RuleTree)>,
    context: Arc<Context<'static>>,
}

/// The compiled rules of one schema node and of the nodes below it, kept beside the schema's
/// tree ([`Node`]) and shaped like it.
#[derive(Debug)]
struct RuleTree {
    rules: Vec<CompiledRule>,
    /// The parts of the value the rules can reach.
    projection: Projection,
    /// Whether this node or any node below it has rules.
    has_rules: bool,
    /// Whether any rule of this node uses `oldSelf`.
    uses_old_self: bool,
    /// The trees of the node's properties, in the same order.
    properties: Vec<RuleTree>,
    additional: Option<Box<RuleTree>>,
    items: Option<Box<RuleTree>>,
}

impl RuleTree {
    /// A tree without rules shaped like `node`.
    fn new(node: &Node) -> RuleTree {
        RuleTree {
            rules: Vec::new(),
            projection: Projection::none(),
            has_rules: false,
            uses_old_self: false,
            properties: node
                .properties
                .iter()
                .map(|(_, c)| RuleTree::new(c))
                .collect(),
            additional: node
                .additional
                .as_deref()
                .map(|a| Box::new(RuleTree::new(a))),
            items: node.items.as_deref().map(|i| Box::new(RuleTree::new(i))),
        }
    }
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Rules {
    /// Compiles every rule of `schema` (an `openAPIV3Schema`, as raw JSON) found at `path`.
    ///
    /// The errors are those upstream reports when a CRD carrying this schema is written: a rule
    /// that does not compile, a bad `reason`, `fieldPath` or `messageExpression`, `oldSelf`
    /// where it cannot be correlated, and estimated costs over the limits. Rules with errors
    /// are left out of the result.
    pub fn compile(schema: &Value, path: &Path) -> (Rules, ErrorList) {
        let mut errs = ErrorList::new();
        let mut costs: Vec<CostContribution> = Vec::new();
        let env = Environment::new();
        let root = Node::read(schema, true);
        let mut tree = RuleTree::new(&root);
        attach(
            &env, schema, &root, &mut tree, path, None, 1, &mut errs, &mut costs,
        );
        let total = costs
            .iter()
            .map(|(_, c)| *c)
            .fold(0u64, u64::saturating_add);
        if total > STATIC_ESTIMATED_CRD_COST_LIMIT {
            // upstream names the (at most four) dearest expressions that make at least 1% of
            // the limit, then the total
            let mut dearest: Vec<_> = costs
                .iter()
                .filter(|(_, c)| *c >= STATIC_ESTIMATED_CRD_COST_LIMIT / 100)
                .collect();
            dearest.sort_by_key(|c| std::cmp::Reverse(c.1));
            for (p, _) in dearest.iter().take(4) {
                errs.push(field::Error::forbidden(
                    p,
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                ));
            }
            errs.push(field::Error::forbidden(
                path,
                cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    total,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                ),
            ));
        }
        let context = Arc::clone(env.context());
        let root = tree.has_rules.then_some((root, tree));
        (Rules { root, context }, errs)
    }

    /// Whether the schema has no rule at all (then [`Rules::validate`] does nothing).
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Runs every rule against `new` (and, on update, the `old` object), returning upstream's
    /// field errors (`spec: Invalid value: "object": <message>`), with paths from the object's
    /// root (`spec.replicas`).
    ///
    /// Ratcheting (on update): a rule without `oldSelf` that fails on a value equal to its old
    /// value (or, where the value cannot be correlated, under an unchanged ancestor) is not an
    /// error; [`Rules::validate_with_warnings`] returns such failures as warnings, as upstream
    /// sends them. Evaluation errors (`no such key`) stay errors, as upstream.
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> ErrorList {
        self.validate_with_warnings(new, old).0
    }

    /// [`Rules::validate`], also returning the failures that ratcheting turned into warnings
    /// (rendered like errors: `spec: Invalid value: "object": <message>`).
    pub fn validate_with_warnings(
        &self,
        new: &Value,
        old: Option<&Value>,
    ) -> (ErrorList, Vec<String>) {
        self.run(new, old, None)
            .expect("invariant: rules without inline allowance never yield")
    }

    /// [`Rules::validate_with_warnings`] for a caller on an async runtime's worker thread:
    /// `None` once the rules have spent `allowance` cost units (counted as [`cost`] counts
    /// them), for the caller to validate again where a long evaluation holds no worker (what
    /// ran is at most the allowance).
    pub fn validate_inline(
        &self,
        new: &Value,
        old: Option<&Value>,
        allowance: cost::Inline,
    ) -> Option<(ErrorList, Vec<String>)> {
        self.run(new, old, Some(allowance))
    }

    fn run(
        &self,
        new: &Value,
        old: Option<&Value>,
        inline: Option<cost::Inline>,
    ) -> Option<(ErrorList, Vec<String>)> {
        let inline = inline.map(|i| (i.units, std::time::Instant::now() + i.time));
        let mut errs = ErrorList::new();
        let mut warnings = Vec::new();
        let Some((root, tree)) = &self.root else {
            return Some((errs, warnings));
        };
        let mut run = Run {
            ctx: &self.context,
            errs: &mut errs,
            warnings: &mut warnings,
            budget: RUNTIME_CEL_COST_BUDGET,
            inline,
            yielded: false,
            deadline: cost::time_for(RUNTIME_CEL_COST_BUDGET as u64),
        };
        let anchor = old.map(|o| (new, o));
        run.walk(root, tree, new, old, &Path::default(), anchor, true);
        (!run.yielded).then_some((errs, warnings))
    }
}

/// Compiles the rules of `node` (into `tree`) and its children (children first, as upstream
/// reports them).
#[allow(clippy::too_many_arguments)]
fn attach(
    env: &Environment<'_>,
    schema: &Value,
    node: &Node,
    tree: &mut RuleTree,
    path: &Path,
    uncorrelatable: Option<&Path>,
    cardinality: u64,
    errs: &mut ErrorList,
    costs: &mut Vec<CostContribution>,
) {
    let own_elements = node.max_elements().max(1);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for ((name, child), sub) in node.properties.iter().zip(tree.properties.iter_mut()) {
            if let Some(s) = props.get(name.as_str()) {
                let p = path.child("properties").key(name);
                attach(
                    env,
                    s,
                    child,
                    sub,
                    &p,
                    uncorrelatable,
                    cardinality,
                    errs,
                    costs,
                );
            }
        }
    }
    if let (Some(s), Some(add), Some(sub)) = (
        schema.get("additionalProperties"),
        node.additional.as_deref(),
        tree.additional.as_deref_mut(),
    ) {
        let card = if node.is_map() {
            cardinality.saturating_mul(own_elements)
        } else {
            cardinality
        };
        let p = path.child("additionalProperties");
        attach(env, s, add, sub, &p, uncorrelatable, card, errs, costs);
    }
    if let (Some(s), Some(items), Some(sub)) = (
        schema.get("items"),
        node.items.as_deref(),
        tree.items.as_deref_mut(),
    ) {
        let forbid = if node.list_type == ListType::Map {
            uncorrelatable.cloned()
        } else {
            Some(uncorrelatable.cloned().unwrap_or_else(|| path.clone()))
        };
        let p = path.child("items");
        let card = cardinality.saturating_mul(own_elements);
        attach(env, s, items, sub, &p, forbid.as_ref(), card, errs, costs);
    }
    if let Some(raw_rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        let mut rules = Vec::with_capacity(raw_rules.len());
        for (i, raw) in raw_rules.iter().enumerate() {
            if let Some(r) = rule::compile(
                env,
                raw,
                i,
                node,
                path,
                uncorrelatable,
                cardinality,
                errs,
                costs,
            ) {
                rules.push(r);
            }
        }
        tree.rules = rules;
    }
    // Rules inside allOf apply to the same value, typed by this node. Upstream does not check
    // them when the CRD is written (it only runs them), so their problems are not reported.
    if let Some(branches) = schema.get("allOf").and_then(Value::as_array) {
        for branch in branches {
            overlay(env, branch, node, tree, uncorrelatable, cardinality);
        }
    }
    refresh(tree);
}

/// Recomputes what a tree's flags say about its rules and its children's.
fn refresh(tree: &mut RuleTree) {
    tree.uses_old_self = tree.rules.iter().any(|r| r.uses_old_self);
    let mut projection = Projection::none();
    for rule in &tree.rules {
        for program in std::iter::once(&rule.program).chain(&rule.message_expression) {
            stack::for_tree(program.depth, || projection.add_uses(&program.expr));
        }
    }
    tree.projection = projection;
    tree.has_rules = !tree.rules.is_empty()
        || tree.properties.iter().any(|t| t.has_rules)
        || tree.additional.as_ref().is_some_and(|t| t.has_rules)
        || tree.items.as_ref().is_some_and(|t| t.has_rules);
}

/// Adds the rules of an `allOf` branch (and of its properties, items and additionalProperties)
/// to `node`'s tree and its children.
fn overlay(
    env: &Environment<'_>,
    branch: &Value,
    node: &Node,
    tree: &mut RuleTree,
    uncorrelatable: Option<&Path>,
    cardinality: u64,
) {
    let mut ignored = ErrorList::new();
    let mut costs = Vec::new();
    if let Some(raw_rules) = branch
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        let path = Path::default();
        for (i, raw) in raw_rules.iter().enumerate() {
            let compiled = rule::compile(
                env,
                raw,
                i,
                node,
                &path,
                uncorrelatable,
                cardinality,
                &mut ignored,
                &mut costs,
            );
            tree.rules.extend(compiled);
        }
    }
    if let Some(props) = branch.get("properties").and_then(Value::as_object) {
        for ((name, child), sub) in node.properties.iter().zip(tree.properties.iter_mut()) {
            if let Some(b) = props.get(name.as_str()) {
                overlay(env, b, child, sub, uncorrelatable, cardinality);
                refresh(sub);
            }
        }
    }
    if let (Some(b), Some(items), Some(sub)) = (
        branch.get("items"),
        node.items.as_deref(),
        tree.items.as_deref_mut(),
    ) {
        overlay(env, b, items, sub, uncorrelatable, cardinality);
        refresh(sub);
    }
    if let (Some(b), Some(add), Some(sub)) = (
        branch.get("additionalProperties"),
        node.additional.as_deref(),
        tree.additional.as_deref_mut(),
    ) {
        overlay(env, b, add, sub, uncorrelatable, cardinality);
        refresh(sub);
    }
}

/// One validation: where errors go and the cost budget left.
struct Run<'r> {
    ctx: &'r Context<'static>,
    errs: &'r mut ErrorList,
    /// Failures that ratcheting turned into warnings.
    warnings: &'r mut Vec<String>,
    budget: i64,
    /// What is left of the inline allowance, if there is one: units, until when.
    inline: Option<(u64, std::time::Instant)>,
    /// Whether the validation stopped at the end of the inline allowance.
    yielded: bool,
    /// When the time the budget stands for is up ([`cost::Budget::new`]).
    deadline: Option<std::time::Instant>,
}

/// The nearest correlated (new, old) pair above or at a node, for ratcheting.
type Anchor<'v> = Option<(&'v Value, &'v Value)>;

impl Run<'_> {
    /// Validates `new` against `node` and its children. Returns false once the budget is spent.
    #[allow(clippy::too_many_arguments)]
    fn walk<'v>(
        &mut self,
        node: &Node,
        tree: &RuleTree,
        new: &'v Value,
        old: Option<&'v Value>,
        path: &Path,
        anchor: Anchor<'v>,
        at_root: bool,
    ) -> bool {
        if !tree.has_rules || new.is_null() {
            return true;
        }
        let old = old.filter(|o| !o.is_null());
        let anchor = match old {
            Some(o) if anchor.is_some() => Some((new, o)),
            _ => anchor,
        };
        if !tree.rules.is_empty() && !self.rules(node, tree, new, old, path, anchor) {
            return false;
        }
        match new {
            Value::Object(fields) => {
                let old_fields = old.and_then(Value::as_object);
                if !node.properties.is_empty() {
                    for ((name, child), sub) in node.properties.iter().zip(&tree.properties) {
                        if !sub.has_rules {
                            continue;
                        }
                        let Some(v) = fields.get(name) else { continue };
                        let o = old_fields.and_then(|f| f.get(name));
                        // apiVersion and kind of a resource are never ratcheted; a field new in this
                        // update has no old value to ratchet against
                        let a = if o.is_none()
                            || (at_root && matches!(name.as_str(), "apiVersion" | "kind"))
                        {
                            None
                        } else {
                            anchor
                        };
                        if !self.walk(child, sub, v, o, &path.child(name), a, false) {
                            return false;
                        }
                    }
                } else if let (Some(add), Some(sub)) = (
                    node.additional.as_deref(),
                    tree.additional.as_deref().filter(|t| t.has_rules),
                ) {
                    for (k, v) in fields {
                        let o = old_fields.and_then(|f| f.get(k));
                        let a = if o.is_none() { None } else { anchor };
                        if !self.walk(add, sub, v, o, &path.key(k), a, false) {
                            return false;
                        }
                    }
                }
            }
            Value::Array(items) => {
                let (Some(item_node), Some(sub)) = (
                    node.items.as_deref(),
                    tree.items.as_deref().filter(|t| t.has_rules),
                ) else {
                    return true;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, v) in items.iter().enumerate() {
                    // only items of map lists correlate with old items (by their keys)
                    let o = match (node.list_type, old_items) {
                        (ListType::Map, Some(olds)) => {
                            olds.iter().find(|o| same_keys(&node.map_keys, v, o))
                        }
                        _ => None,
                    };
                    // an uncorrelated item ratchets with its list (the anchor)
                    if !self.walk(item_node, sub, v, o, &path.index(i), anchor, false) {
                        return false;
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// Runs `program` (of `rule`) in `scope`, its estimate `estimate` already charged, counted
    /// by a meter that also holds it to the inline allowance: its result, or `None` once the
    /// validation stops (cancelled past the per-call limit, or what it counted beyond its
    /// estimate more than the budget left: the error is reported at `path`; or yielded).
    fn run_program(
        &mut self,
        program: &Program,
        scope: &Context<'_>,
        estimate: u64,
        (path, node, rule): (&Path, &Node, &CompiledRule),
    ) -> Option<Result<Cel, ExecutionError>> {
        let meter = std::sync::Arc::new(cost::Meter::new(
            program.outside_loops,
            PER_CALL_LIMIT,
            cost::yield_at(self.inline),
            self.deadline,
        ));
        let result = program.run_metered(scope, &meter);
        match meter.stopped() {
            Some(cost::Stop::Cancelled) => {
                self.cancelled(path, node, rule);
                None
            }
            Some(cost::Stop::Yield) => {
                self.yielded = true;
                None
            }
            None => {
                let spent = meter.spent().max(estimate);
                if let Some((units, _)) = &mut self.inline {
                    *units = units.saturating_sub(spent);
                }
                self.charge_beyond_estimate(path, node, estimate, spent)
                    .then_some(result)
            }
        }
    }

    /// Whether a program estimated at `cost` must yield before it runs.
    fn must_yield(&mut self, cost: u64) -> bool {
        if self
            .inline
            .is_some_and(|(units, until)| cost > units || std::time::Instant::now() > until)
        {
            self.yielded = true;
        }
        self.yielded
    }

    /// The error of a rule its meter cancelled; the budget is spent.
    fn cancelled(&mut self, path: &Path, node: &Node, rule: &CompiledRule) {
        self.invalid(
            path,
            node,
            &format!(
                "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                cost::CANCELLED,
                rule.error_string()
            ),
        );
        self.budget = -1;
    }

    /// Reports that the budget is spent (no further rule runs); false.
    fn out_of_budget(&mut self, path: &Path, node: &Node) -> bool {
        self.invalid(
            path,
            node,
            "validation failed due to running out of cost budget, no further validation rules will be run",
        );
        self.budget = -1;
        false
    }

    /// Charges the part of a run's cost its estimate did not; false (and the error) once
    /// that is more than the budget left.
    fn charge_beyond_estimate(
        &mut self,
        path: &Path,
        node: &Node,
        estimate: u64,
        spent: u64,
    ) -> bool {
        let beyond = i64::try_from(spent.saturating_sub(estimate)).unwrap_or(i64::MAX);
        if beyond > self.budget {
            return self.out_of_budget(path, node);
        }
        self.budget -= beyond;
        true
    }

    /// Runs the rules of one node. Returns false once the budget is spent.
    fn rules(
        &mut self,
        node: &Node,
        tree: &RuleTree,
        new: &Value,
        old: Option<&Value>,
        path: &Path,
        anchor: Anchor<'_>,
    ) -> bool {
        if self.budget <= 0 {
            return self.out_of_budget(path, node);
        }
        // ratcheting: on an unchanged value, failures of rules that do not look at oldSelf are
        // warnings
        let mut unchanged: Option<bool> = None;
        let mut is_unchanged = || {
            *unchanged.get_or_insert_with(|| match old {
                Some(o) => new == o,
                None => anchor.is_some_and(|(n, o)| n == o),
            })
        };
        // self (and oldSelf) are converted once per node, for all its rules
        let ctx = self.ctx;
        let mut base_scope: Option<Context<'_>> = None;
        for rule in &tree.rules {
            if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let ratcheted = !rule.uses_old_self && anchor.is_some() && is_unchanged();
            let cost = match rule.fixed_cost {
                Some(c) => c,
                None => runtime_cost(&rule.program, node, new, old),
            };
            if cost > PER_CALL_LIMIT {
                self.cancelled(path, node, rule);
                return false;
            }
            if self.must_yield(cost) {
                return false;
            }
            if cost as i64 > self.budget {
                return self.out_of_budget(path, node);
            }
            self.budget -= cost as i64;

            let base = base_scope.get_or_insert_with(|| {
                let mut scope = ctx.new_inner_scope();
                scope.add_variable_from_value(
                    "self",
                    value::to_cel(new, Some(node), &tree.projection),
                );
                if let (true, Some(o)) = (tree.uses_old_self, old) {
                    scope.add_variable_from_value(
                        "oldSelf",
                        value::to_cel(o, Some(node), &tree.projection),
                    );
                }
                scope
            });
            let optional_scope;
            let scope: &Context<'_> = if rule.optional_old_self {
                // oldSelf is an optional: none on create, of(old) on update
                let bound = OptionalValue::of_or_none(
                    old.map(|o| value::to_cel(o, Some(node), &tree.projection)),
                );
                let mut scope = base.new_inner_scope();
                scope.add_variable_from_value("oldSelf", Cel::Opaque(Arc::new(bound)));
                optional_scope = scope;
                &optional_scope
            } else {
                base
            };
            let Some(result) = self.run_program(&rule.program, scope, cost, (path, node, rule))
            else {
                return false;
            };
            match result {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => {
                    if !self.fail(rule, node, new, old, path, scope, ratcheted) {
                        return false;
                    }
                }
                Ok(other) => self.invalid(
                    path,
                    node,
                    &format!(
                        "no such overload: rule result {:?} is not a bool evaluating rule: {}",
                        other.type_of(),
                        rule.error_string()
                    ),
                ),
                Err(e) => {
                    let detail = match &e {
                        ExecutionError::NoSuchOverload
                        | ExecutionError::UnsupportedBinaryOperator(..)
                        | ExecutionError::UnsupportedUnaryOperator(..)
                        | ExecutionError::ValuesNotComparable(..) => format!(
                            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule.error_string()
                        ),
                        other => format!(
                            "{} evaluating rule: {}",
                            go_error(other),
                            rule.error_string()
                        ),
                    };
                    self.invalid(path, node, &detail);
                }
            }
        }
        true
    }

    /// Reports a failed rule (as a warning if `ratcheted`). Returns false once the budget is
    /// spent.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &mut self,
        rule: &CompiledRule,
        node: &Node,
        new: &Value,
        old: Option<&Value>,
        path: &Path,
        scope: &Context<'_>,
        ratcheted: bool,
    ) -> bool {
        let at = match &rule.field_path {
            Some(fp) => path.child(fp),
            None => path.clone(),
        };
        let mut detail = None;
        if let Some(program) = &rule.message_expression {
            let cost = runtime_cost(program, node, new, old);
            if cost as i64 > self.budget || cost > PER_CALL_LIMIT {
                self.report(
                    field::Error::invalid(
                        &at,
                        node.type_name(),
                        "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
                    ),
                    ratcheted,
                );
                self.budget = -1;
                return false;
            }
            if self.must_yield(cost) {
                return false;
            }
            self.budget -= cost as i64;
            let Some(result) = self.run_program(program, scope, cost, (&at, node, rule)) else {
                return false;
            };
            if let Ok(Cel::String(s)) = result {
                let trimmed = s.trim();
                if !trimmed.is_empty()
                    && trimmed.len() <= MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES
                    && !trimmed.contains('\n')
                {
                    detail = Some(trimmed.to_owned());
                }
            }
        }
        let detail = detail.unwrap_or_else(|| rule.message_or_default());
        let err = match rule.reason {
            ErrorType::Forbidden => field::Error::forbidden(&at, detail),
            ErrorType::Required => field::Error::required(&at, detail),
            ErrorType::Duplicate => field::Error::duplicate(&at, node.type_name()),
            _ => field::Error::invalid(&at, node.type_name(), detail),
        };
        self.report(err, ratcheted);
        true
    }

    /// An error, or a warning where ratcheting applies.
    fn report(&mut self, err: field::Error, ratcheted: bool) {
        if ratcheted {
            self.warnings.push(err.to_string());
        } else {
            self.errs.push(err);
        }
    }

    fn invalid(&mut self, path: &Path, node: &Node, detail: &str) {
        self.errs.push(field::Error::invalid(
            path,
            node.type_name(),
            detail.to_owned(),
        ));
    }
}

/// The run-time cost of a CRD rule on actual values (see [`analyze::runtime_cost`]): `self`
/// and `oldSelf` typed by `node`, sized by `new` and `old`.
fn runtime_cost(program: &Program, node: &Node, new: &Value, old: Option<&Value>) -> u64 {
    let bindings = vec![
        ("self".to_owned(), Ty::Schema(node, Some(vec![new]))),
        (
            "oldSelf".to_owned(),
            Ty::Schema(node, Some(old.into_iter().collect())),
        ),
    ];
    stack::for_tree(program.depth, || {
        analyze::runtime_cost(&program.expr, bindings)
    })
}

/// `optional.of(v)` or `optional.none()`.
trait OptionalExt {
    fn of_or_none(v: Option<Cel>) -> OptionalValue;
}

impl OptionalExt for OptionalValue {
    fn of_or_none(v: Option<Cel>) -> OptionalValue {
        match v {
            Some(v) => OptionalValue::of(v),
            None => OptionalValue::none(),
        }
    }
}

/// Whether two items of a map list have the same key fields.
fn same_keys(keys: &[String], a: &Value, b: &Value) -> bool {
    !keys.is_empty() && keys.iter().all(|k| a.get(k) == b.get(k))
}

#[cfg(test)]
mod tests;
