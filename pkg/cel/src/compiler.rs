//! Compiling one CEL expression over declared variables, and evaluating it with JSON values.
//!
//! ```text
//! let env = Environment::new()
//!     .variable("object", VarType::Dyn)
//!     .variable("request", VarType::Dyn);
//! let program = env.compile("object.metadata.name.startsWith('x')", &Path::new("spec")
//!     .child("validations").index(0).child("expression"))?;   // Error::Compile: a 422 cause
//! let verdict = program.evaluate(&Activation::new().bind("object", &obj).bind("request", &req))?;
//! ```
//!
//! A variable is [`VarType::Dyn`] (any JSON: fields are only known when the expression runs)
//! or [`VarType::Object`], typed by an OpenAPI v3 schema ([`ObjectType`]): then selecting a
//! field the schema does not declare is a compile error, the estimated cost uses the schema's
//! bounds (`maxLength`, `maxItems`, ...), and `==` on `set` and `map` lists ignores order.
//!
//! Every expression passes the limits of [`crate::source`] before it is parsed; the parser, the
//! interpreter and the walks of the tree run on a stack segment sized for the expression
//! ([`crate::stack`]); a panic of the interpreter is an evaluation error. Before it runs, an
//! expression is charged its cost on the actual values (the static estimate's model with the
//! values' real sizes); over the environment's limit ([`crate::PER_CALL_LIMIT`] unless set) it
//! does not run. While it runs, every iteration of every comprehension is counted
//! ([`crate::cost`]), and the evaluation is cancelled past the same limit.
//!
//! The CRD rules (`x-kubernetes-validations`, [`crate::Rules`]) compile through the same
//! environment, with `self` and `oldSelf` typed by the node the rule is declared on.
//!
//! Values are converted by their JSON type alone: a `date-time` string of a typed variable is
//! a CEL string when it runs (only the CRD rules see the schema's formats as timestamps,
//! durations and bytes).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use genplane_apimachinery::validation::field::{self, Path};
use kube_cel::KubeCelExt as _;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::objects::Value as Cel;
use kube_cel::cel::{Context, ExecutionError};
use serde_json::Value;

use crate::analyze::{self, Analysis, Ty};
use crate::cost::{self, Budget, Meter, Stop};
use crate::direct::{self, Direct, DirectVars};
use crate::projection::{ALL, Reach};
use crate::schema::Node;
use crate::{optional, parse, rewrite, stack, types, value};

/// A CEL value: what an expression evaluates to.
pub use kube_cel::cel::objects::Value as CelValue;

/// A CEL map of string keys (e.g. admission policies' `variables`, by name).
pub fn map_value(entries: impl IntoIterator<Item = (String, CelValue)>) -> CelValue {
    let map: std::collections::HashMap<kube_cel::cel::objects::Key, CelValue> = entries
        .into_iter()
        .map(|(k, v)| (kube_cel::cel::objects::Key::String(Arc::new(k)), v))
        .collect();
    CelValue::Map(kube_cel::cel::objects::Map::from(map))
}

/// Why an expression does not compile or does not evaluate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The expression does not compile: over a limit, a syntax error, an undeclared
    /// reference, a field its variable's schema does not declare. Rendered, and turned into a
    /// field error ([`Error::to_field_error`]), as upstream reports it:
    /// `<path>: Invalid value: "<expression>": compilation failed: ERROR: <input>:1:1: ...`.
    #[error("{}", self.render())]
    Compile {
        /// Where the expression sits in the object that carries it (the caller's).
        path: Path,
        /// The expression.
        expression: String,
        /// cel-go's rendering of the problems, one per line (`ERROR: <input>:1:5: ...`).
        message: String,
    },
    /// The cost of the expression on the values at hand is over the environment's limit; it
    /// did not run.
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimitExceeded {
        /// What the expression would have cost.
        cost: u64,
        /// The limit.
        limit: u64,
    },
    /// The expression failed when it ran, in cel-go's words (`no such key: foo`,
    /// `no such overload`, `division by zero`).
    #[error("{0}")]
    Evaluation(String),
    /// The evaluation cost more than what was left of its series' [`crate::Budget`]
    /// (upstream's words for a policy's or an object's rules).
    #[error(
        "validation failed due to running out of cost budget, no further validation rules will be run"
    )]
    OutOfBudget,
    /// The evaluation stopped when its series had spent the budget's inline allowance
    /// ([`crate::Budget::inline`]): the caller runs the series again off the async runtime.
    /// Never an answer to show.
    #[error("evaluation interrupted: it needs more than the inline allowance")]
    Yielded,
}

impl Error {
    /// The field error of a compile error (`Invalid`, the expression as the bad value), as a
    /// cause of a 422 Status; `None` for evaluation errors, which belong to the caller's own
    /// wording.
    pub fn to_field_error(&self) -> Option<field::Error> {
        match self {
            Error::Compile {
                path,
                expression,
                message,
            } => Some(field::Error::invalid(
                path,
                expression.as_str(),
                format!("compilation failed: {message}"),
            )),
            _ => None,
        }
    }

    fn render(&self) -> String {
        self.to_field_error()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }
}

/// The type of a declared variable.
#[derive(Clone, Copy, Debug)]
pub enum VarType<'s> {
    /// Any value; its fields are known only when the expression runs.
    Dyn,
    /// A value of an OpenAPI v3 schema.
    Object(&'s ObjectType),
}

/// An OpenAPI v3 schema read for typing a variable (see [`VarType::Object`]).
#[derive(Debug)]
pub struct ObjectType {
    node: Node,
}

impl ObjectType {
    /// Reads `schema` (an `openAPIV3Schema` as JSON) as the type of a resource: `apiVersion`,
    /// `kind` and `metadata` are fields even when the schema does not declare them.
    pub fn from_schema(schema: &Value) -> Self {
        ObjectType {
            node: Node::read(schema, true),
        }
    }
}

/// A declared variable's type, as the analysis sees it.
#[derive(Clone, Copy, Debug)]
enum Decl<'s> {
    Dyn,
    Node(&'s Node),
}

/// The variables an expression may use, their types, and the functions of the Kubernetes CEL
/// environment (kube-cel's libraries, the optional library, `type()`/`dyn()`). Compiles
/// [`Program`]s; cheap to reuse for many expressions.
pub struct Environment<'s> {
    vars: Vec<(String, Decl<'s>)>,
    context: Arc<Context<'static>>,
    cost_limit: u64,
    /// Whether `Object{...}`, `Object.<field>...{...}` and `JSONPatch{...}` constructions and
    /// `jsonpatch.escapeKey` are declared (mutating admission policies' expressions).
    objects: bool,
    /// Whether compiling reports comparisons of operands whose types have no overload
    /// ([`Environment::type_checking`]).
    type_check: bool,
}

impl fmt::Debug for Environment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field("vars", &self.vars)
            .field("cost_limit", &self.cost_limit)
            .field("objects", &self.objects)
            .field("type_check", &self.type_check)
            .finish_non_exhaustive()
    }
}

impl Default for Environment<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'s> Environment<'s> {
    /// An environment without variables, with the per-call cost limit
    /// [`crate::PER_CALL_LIMIT`].
    pub fn new() -> Self {
        Environment {
            vars: Vec::new(),
            context: Arc::new(base_context()),
            cost_limit: crate::PER_CALL_LIMIT,
            objects: false,
            type_check: false,
        }
    }

    /// Declares what mutating admission policies build their results with: `Object{...}` and
    /// `Object.<field>{...}` (an object of the written kind, or one of its fields; any field
    /// name, as the values are untyped here), `JSONPatch{op, path, from, value}` and
    /// `jsonpatch.escapeKey(key)` (`~` as `~0`, `/` as `~1`). A construction evaluates to a map
    /// of its fields ([`to_json`] makes it JSON).
    pub fn with_object_types(mut self) -> Self {
        self.objects = true;
        self
    }

    /// Compiling reports, besides undeclared references and undefined fields, comparisons
    /// (`==`, `!=`, `<`, `<=`, `>`, `>=`) of operands whose types are certain and have no
    /// overload (`found no matching overload for '_<=_' applied to '(int, string)'`), as
    /// cel-go's checker does: what an admission policy's type checking warns of. Without it
    /// such an expression compiles and fails when it runs, as an unchecked one does upstream.
    pub fn type_checking(mut self) -> Self {
        self.type_check = true;
        self
    }

    /// Declares the variable `name` (a later declaration of the same name wins).
    pub fn variable(mut self, name: impl Into<String>, ty: VarType<'s>) -> Self {
        let decl = match ty {
            VarType::Dyn => Decl::Dyn,
            VarType::Object(t) => Decl::Node(&t.node),
        };
        self.vars.push((name.into(), decl));
        self
    }

    /// Sets the cost limit of one evaluation of the programs compiled from now on.
    pub fn cost_limit(mut self, limit: u64) -> Self {
        self.cost_limit = limit;
        self
    }

    /// A new environment without variables, with this one's functions and cost limit.
    pub(crate) fn sharing<'t>(&self) -> Environment<'t> {
        Environment {
            vars: Vec::new(),
            context: Arc::clone(&self.context),
            cost_limit: self.cost_limit,
            objects: false,
            type_check: false,
        }
    }

    /// Declares `name` typed by a schema node (the CRD rules' `self` and `oldSelf`).
    pub(crate) fn node_variable(mut self, name: &str, node: &'s Node) -> Self {
        self.vars.push((name.to_owned(), Decl::Node(node)));
        self
    }

    /// The functions programs of this environment run with.
    pub(crate) fn context(&self) -> &Arc<Context<'static>> {
        &self.context
    }

    /// Compiles `expression`, which sits at `path` of the object that carries it (for the
    /// error). Any finding of the analysis (undeclared reference, undefined field of a typed
    /// variable) is a compile error; the result's type is the caller's to check.
    pub fn compile(&self, expression: &str, path: &Path) -> Result<Program, Error> {
        let compile_error = |message: String| Error::Compile {
            path: path.clone(),
            expression: expression.to_owned(),
            message,
        };
        let (program, analysis) = self.check(expression).map_err(compile_error)?;
        if !analysis.issues.is_empty() {
            let issues: Vec<&str> = analysis.issues.iter().map(|i| i.message.as_str()).collect();
            return Err(compile_error(issues.join("\n")));
        }
        Ok(program)
    }

    /// Parses (within the limits of [`crate::source`]), rewrites ([`crate::rewrite`]) and
    /// analyses `source`; the error is cel-go's rendering of why it does not parse. The
    /// analysis's findings are the caller's to report.
    pub(crate) fn check(&self, source: &str) -> Result<(Program, Analysis), String> {
        let parsed = parse::parse(source).map_err(|e| e.to_string())?;
        let mut expr = parsed.expr;
        stack::for_tree(parsed.depth, move || {
            let errors = rewrite::rewrite(&mut expr, self.objects);
            if errors.is_empty() {
                let mut next_id = rewrite::max_id(&expr) + 1;
                cost::insert_ticks(&mut expr, &mut next_id);
            }
            let depth = parse::depth(&expr);
            if !errors.is_empty() || depth > parse::MAX_TREE_DEPTH {
                parse::dismantle(expr);
                if errors.is_empty() {
                    return Err(parse::ParseError::TooDeep {
                        limit: parse::MAX_TREE_DEPTH,
                    }
                    .to_string());
                }
                return Err(errors.join("\n"));
            }
            let scopes = self
                .vars
                .iter()
                .map(|(name, decl)| {
                    let ty = match decl {
                        Decl::Dyn => Ty::Dyn,
                        Decl::Node(n) => Ty::Schema(n, None),
                    };
                    (name.clone(), ty)
                })
                .collect();
            let analysis = analyze::analyze(source, &expr, scopes, self.type_check);
            unordered_equality(&mut expr, &analysis.unordered_eq);
            let free_below = analyze::free_below(
                &expr,
                self.vars.iter().map(|(n, _)| n.as_str()),
                self.cost_limit,
            );
            let outside_loops = cost::nodes_outside_loops(&expr);
            let program = Program {
                expr,
                depth,
                cost: analysis.cost,
                cost_limit: self.cost_limit,
                free_below,
                outside_loops,
                context: Arc::clone(&self.context),
            };
            Ok((program, analysis))
        })
    }
}

/// The Kubernetes CEL functions: kube-cel's libraries, order-insensitive list equality, the
/// `type()`/`dyn()` functions, the optional library and the functions of the rewrites.
fn base_context() -> Context<'static> {
    let mut context = Context::default();
    context.register_all();
    context.add_function("size", size);
    context.add_function(UNORDERED_EQ, unordered_eq);
    context.add_function(UNORDERED_NE, unordered_ne);
    types::register(&mut context);
    optional::register(&mut context);
    rewrite::register(&mut context);
    crate::authz::register(&mut context);
    cost::register(&mut context);
    context
}

/// The values of an evaluation's variables, as JSON (or as CEL values already, for values
/// computed by other expressions: admission policies' `variables`).
#[derive(Clone, Debug, Default)]
pub struct Activation<'v> {
    vars: Vec<(String, &'v Value)>,
    cel_vars: Vec<(String, CelValue)>,
}

impl<'v> Activation<'v> {
    /// A scope of `context` with these values converted to CEL, each JSON value with what
    /// `projection` says of its name (`None`: left unbound; a CEL value is bound unless that
    /// is `None`), and the total size of what it binds ([`value::total_size`]).
    fn scope<'c, 'p>(
        &self,
        context: &'c Context<'static>,
        projection: impl Fn(&str) -> Option<&'p crate::projection::Projection>,
    ) -> (Context<'c>, u64) {
        let mut scope = context.new_inner_scope();
        let mut size = 0u64;
        for (name, v) in &self.cel_vars {
            if projection(name).is_some() {
                size = size.saturating_add(value::total_size(v));
                scope.add_variable_from_value(name.as_str(), v.clone());
            }
        }
        for (name, v) in &self.vars {
            if let Some(projection) = projection(name) {
                let converted = value::to_cel(v, None, projection);
                size = size.saturating_add(value::total_size(&converted));
                scope.add_variable_from_value(name.as_str(), converted);
            }
        }
        (scope, size)
    }

    /// No values yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `name` to `value` (a later binding of the same name wins).
    pub fn bind(mut self, name: impl Into<String>, value: &'v Value) -> Self {
        self.vars.push((name.into(), value));
        self
    }

    /// Binds `name` to a CEL value (the result of another program); a binding of the same
    /// name made with [`Activation::bind`] wins. Its runtime cost counts it as size 1.
    pub fn bind_value(mut self, name: impl Into<String>, value: CelValue) -> Self {
        self.cel_vars.push((name.into(), value));
        self
    }
}

/// The variables of an [`Activation`] converted once, for evaluating several programs of
/// one [`Environment`] with them ([`Environment::prepare`], [`Program::evaluate_prepared`]).
pub struct Prepared<'e, 'v> {
    scope: Context<'e>,
    context: &'e Arc<Context<'static>>,
    activation: Activation<'v>,
    /// The total size of the converted values ([`value::total_size`]).
    size: u64,
}

impl Reach {
    /// Widens what is reached with the uses in `program`.
    pub fn add(&mut self, program: &Program) {
        stack::for_tree(program.depth, || self.add_uses(&program.expr));
    }
}

impl<'v> Prepared<'_, 'v> {
    /// These variables and `extra` ones (CEL values, converted once here rather than for each
    /// program: admission policies' `variables` for their validations).
    pub fn extend(&self, extra: &[(&str, CelValue)]) -> Prepared<'_, 'v> {
        let mut scope = self.scope.new_inner_scope();
        let mut activation = self.activation.clone();
        let mut size = self.size;
        for (name, value) in extra {
            size = size.saturating_add(value::total_size(value));
            scope.add_variable_from_value(*name, value.clone());
            activation = activation.bind_value(*name, value.clone());
        }
        Prepared {
            scope,
            context: self.context,
            activation,
            size,
        }
    }
}

impl fmt::Debug for Prepared<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("activation", &self.activation)
            .finish_non_exhaustive()
    }
}

impl Environment<'_> {
    /// `activation`'s variables converted to CEL once, for the programs of this environment.
    pub fn prepare<'e, 'v>(&'e self, activation: Activation<'v>) -> Prepared<'e, 'v> {
        let (scope, size) = activation.scope(&self.context, |_| Some(&ALL));
        Prepared {
            scope,
            context: &self.context,
            activation,
            size,
        }
    }

    /// As [`Environment::prepare`], converting only what the programs `reach` was made from
    /// can reach: a variable they never name is left unbound, and of the others only the
    /// fields they select. Those programs evaluate as with every value converted; another
    /// program may find fields or variables missing.
    pub fn prepare_reaching<'e, 'v>(
        &'e self,
        activation: Activation<'v>,
        reach: &Reach,
    ) -> Prepared<'e, 'v> {
        let (scope, size) = activation.scope(&self.context, |name| reach.projection(name));
        Prepared {
            scope,
            context: &self.context,
            activation,
            size,
        }
    }
}

/// One compiled expression, ready to run any number of times, concurrently.
pub struct Program {
    /// Its syntax tree, macros expanded.
    pub(crate) expr: IdedExpr,
    /// The depth of the tree: how much stack evaluating it takes.
    pub(crate) depth: usize,
    cost: u64,
    cost_limit: u64,
    /// Below which total size of its values ([`value::total_size`]) no evaluation can be
    /// estimated to cost more than the limit: evaluations on smaller values are not charged
    /// their estimate (they are still counted as they run). `u64::MAX` when no values can
    /// (its cost does not grow with its inputs, or not far enough); 0 when even no values
    /// cost more.
    pub(crate) free_below: u64,
    /// The nodes an evaluation visits outside comprehension loops: where its meter starts.
    pub(crate) outside_loops: u64,
    context: Arc<Context<'static>>,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("depth", &self.depth)
            .field("cost", &self.cost)
            .field("cost_limit", &self.cost_limit)
            .finish_non_exhaustive()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // the derived drop would recurse once per level, on whatever stack drops the program
        parse::dismantle(std::mem::take(&mut self.expr));
    }
}

impl Program {
    /// Whether evaluations are charged their estimate on the actual values (else no values
    /// can make it exceed the limit).
    #[cfg(test)]
    pub(crate) fn charged(&self) -> bool {
        self.free_below != u64::MAX
    }

    /// The estimated cost of one evaluation in the worst case the declared types allow (a
    /// dynamic value counts as size 1): what upstream compares with its static limits.
    pub fn estimated_cost(&self) -> u64 {
        self.cost
    }

    /// Evaluates the expression with the variables of `activation`, first charging its cost on
    /// these values against the environment's limit, and cancelling it past the limit while it
    /// runs. A declared variable left unbound is an evaluation error when the expression
    /// reaches it.
    pub fn evaluate(&self, activation: &Activation<'_>) -> Result<CelValue, Error> {
        self.evaluate_within(activation, &mut Budget::unlimited())
    }

    /// [`Program::evaluate`], charging what the evaluation cost to `budget`
    /// ([`Error::OutOfBudget`] when it cost more than was left, [`Error::Yielded`] past its
    /// inline allowance).
    pub fn evaluate_within(
        &self,
        activation: &Activation<'_>,
        budget: &mut Budget,
    ) -> Result<CelValue, Error> {
        let (scope, size) = activation.scope(&self.context, |_| Some(&ALL));
        let estimate = self.charge(size, activation, &[], budget)?;
        self.run_within(&scope, estimate, budget)
    }

    /// Evaluates the expression with the variables `prepared` holds (converted once for every
    /// program of its environment) and the `extra` ones, as [`Program::evaluate`] does.
    /// A program of another environment converts them again.
    pub fn evaluate_prepared(
        &self,
        prepared: &Prepared<'_, '_>,
        extra: &[(&str, CelValue)],
    ) -> Result<CelValue, Error> {
        self.evaluate_prepared_within(prepared, extra, &mut Budget::unlimited())
    }

    /// [`Program::evaluate_prepared`], charging what the evaluation cost to `budget`, as
    /// [`Program::evaluate_within`] does.
    pub fn evaluate_prepared_within(
        &self,
        prepared: &Prepared<'_, '_>,
        extra: &[(&str, CelValue)],
        budget: &mut Budget,
    ) -> Result<CelValue, Error> {
        if !Arc::ptr_eq(&self.context, prepared.context) {
            let mut activation = prepared.activation.clone();
            for (name, v) in extra {
                activation = activation.bind_value(*name, v.clone());
            }
            return self.evaluate_within(&activation, budget);
        }
        let mut scope = prepared.scope.new_inner_scope();
        let mut size = prepared.size;
        for (name, v) in extra {
            size = size.saturating_add(value::total_size(v));
            scope.add_variable_from_value(*name, v.clone());
        }
        let estimate = self.charge(size, &prepared.activation, extra, budget)?;
        self.run_within(&scope, estimate, budget)
    }

    /// Evaluates the expression with the direct evaluator ([`Direct`]), on the inputs where
    /// they are, when it can give the interpreter's answer, counting its iterations and
    /// charging `budget` as [`Program::evaluate_within`] does; `None` when the interpreter
    /// must evaluate it ([`Program::evaluate_prepared_within`]), also when the values are too
    /// large to skip the estimate's charge. A cancellation past the cost limit and the
    /// budget's errors are answers (`Some(Err(..))`).
    pub fn evaluate_direct<'v>(
        &'v self,
        vars: &DirectVars<'v>,
        budget: &mut Budget,
    ) -> Option<Result<Direct<'v>, Error>> {
        if vars.total_size() >= self.free_below {
            return None;
        }
        let meter = budget.meter(self.outside_loops, self.cost_limit);
        let answer = stack::for_tree(self.depth, || direct::evaluate(&self.expr, vars, &meter));
        match meter.stopped() {
            Some(stop) => Some(Err(self.stopped(stop, meter.spent(), budget))),
            None => {
                let value = answer?;
                Some(self.settle(meter.spent(), budget).map(|()| value))
            }
        }
    }

    /// Charges the estimated cost of an evaluation on these values against the limit (the
    /// CEL values count as size 1), unless their total size (`size`) is too small for any
    /// evaluation to exceed it; the estimate, when it was made.
    fn charge(
        &self,
        size: u64,
        activation: &Activation<'_>,
        extra: &[(&str, CelValue)],
        budget: &Budget,
    ) -> Result<Option<u64>, Error> {
        if size < self.free_below {
            return Ok(None);
        }
        let bindings = activation
            .vars
            .iter()
            .map(|(name, v)| (name.clone(), Ty::Json(vec![*v])))
            .chain(
                activation
                    .cel_vars
                    .iter()
                    .map(|(name, _)| (name.clone(), Ty::Dyn)),
            )
            .chain(extra.iter().map(|(name, _)| ((*name).to_owned(), Ty::Dyn)))
            .collect();
        let cost = stack::for_tree(self.depth, || analyze::runtime_cost(&self.expr, bindings));
        if cost > self.cost_limit {
            return Err(Error::CostLimitExceeded {
                cost,
                limit: self.cost_limit,
            });
        }
        if budget.must_yield(cost) {
            return Err(Error::Yielded);
        }
        Ok(Some(cost))
    }

    /// Runs the expression in `scope` with a meter, and charges `budget` the larger of
    /// `estimate` and what it counted.
    fn run_within(
        &self,
        scope: &Context<'_>,
        estimate: Option<u64>,
        budget: &mut Budget,
    ) -> Result<CelValue, Error> {
        let meter = Arc::new(budget.meter(self.outside_loops, self.cost_limit));
        let result = self.run_metered(scope, &meter);
        if let Some(stop) = meter.stopped() {
            return Err(self.stopped(stop, meter.spent(), budget));
        }
        let spent = meter.spent().max(estimate.unwrap_or(0));
        let value = result.map_err(|e| Error::Evaluation(go_error(&e)))?;
        self.settle(spent, budget).map(|()| value)
    }

    /// The error of an evaluation its meter stopped (charged to the budget as it stands).
    fn stopped(&self, stop: Stop, spent: u64, budget: &mut Budget) -> Error {
        match stop {
            Stop::Yield => Error::Yielded,
            Stop::Cancelled => {
                budget.settle(spent);
                Error::CostLimitExceeded {
                    cost: spent,
                    limit: self.cost_limit,
                }
            }
        }
    }

    /// Charges `budget` what an evaluation cost.
    fn settle(&self, cost: u64, budget: &mut Budget) -> Result<(), Error> {
        if budget.settle(cost) {
            Ok(())
        } else {
            Err(Error::OutOfBudget)
        }
    }

    /// Evaluates the expression in `scope`, counting on `meter`, on a stack deep enough for
    /// it. A panic of the interpreter (a last resort: compilation refuses what is known to
    /// make it panic) is an error. Check `meter` after: past its limit, the result is not the
    /// expression's.
    pub(crate) fn run_metered(
        &self,
        scope: &Context<'_>,
        meter: &Arc<Meter>,
    ) -> Result<Cel, ExecutionError> {
        let scope = cost::metered(scope, meter);
        stack::for_tree(self.depth, || {
            catch_unwind(AssertUnwindSafe(|| Cel::resolve(&self.expr, &scope))).unwrap_or_else(
                |_| {
                    Err(ExecutionError::function_error(
                        "rule",
                        "internal error: the rule could not be evaluated",
                    ))
                },
            )
        })
    }
}

/// A CEL value as JSON: maps (string keys), lists, numbers, strings, booleans and null as
/// themselves, bytes as base64, timestamps as RFC 3339 and durations as Go writes them; an
/// error names a value JSON cannot hold (a type, a function, an empty optional).
pub fn to_json(value: &CelValue) -> Result<Value, Error> {
    use base64::Engine as _;
    let unsupported =
        |v: &CelValue| Error::Evaluation(format!("unsupported value in JSON result: {v:?}"));
    Ok(match value {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| unsupported(value))?,
        Cel::String(s) => Value::String(s.to_string()),
        Cel::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(&**b)),
        Cel::Timestamp(t) => Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        Cel::Duration(d) => Value::String(genplane_apimachinery::duration::format(
            d.to_std().unwrap_or_default(),
        )),
        Cel::List(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Cel::Map(map) => {
            let mut fields = serde_json::Map::new();
            for (key, v) in map.map.iter() {
                let key = match key {
                    kube_cel::cel::objects::Key::String(s) => s.to_string(),
                    other => {
                        return Err(Error::Evaluation(format!(
                            "unsupported map key in JSON result: {other:?}"
                        )));
                    }
                };
                fields.insert(key, to_json(v)?);
            }
            Value::Object(fields)
        }
        other => return Err(unsupported(other)),
    })
}

/// cel-go's wording of runtime errors (`no such key: foo`).
pub(crate) fn go_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..) => "no such overload".to_owned(),
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(i) => match i {
            Cel::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        ExecutionError::UndeclaredReference(r) => format!("undeclared reference to '{r}'"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The function `==` becomes where its left side is a set or map list.
const UNORDERED_EQ: &str = "@k8s_unordered_eq";
/// The function `!=` becomes where its left side is a set or map list.
const UNORDERED_NE: &str = "@k8s_unordered_ne";

/// Rewrites the `==`/`!=` calls with the given ids to order-insensitive equality.
fn unordered_equality(expr: &mut IdedExpr, ids: &[u64]) {
    if ids.is_empty() {
        return;
    }
    match &mut expr.expr {
        Expr::Call(c) => {
            if ids.contains(&expr.id) {
                match c.func_name.as_str() {
                    "_==_" => c.func_name = UNORDERED_EQ.to_owned(),
                    "_!=_" => c.func_name = UNORDERED_NE.to_owned(),
                    _ => {}
                }
            }
            if let Some(t) = c.target.as_deref_mut() {
                unordered_equality(t, ids);
            }
            for a in &mut c.args {
                unordered_equality(a, ids);
            }
        }
        Expr::Select(s) => unordered_equality(&mut s.operand, ids),
        Expr::List(l) => l
            .elements
            .iter_mut()
            .for_each(|e| unordered_equality(e, ids)),
        Expr::Map(m) => m.entries.iter_mut().for_each(|e| {
            if let EntryExpr::MapEntry(me) = &mut e.expr {
                unordered_equality(&mut me.key, ids);
                unordered_equality(&mut me.value, ids);
            }
        }),
        Expr::Comprehension(c) => {
            unordered_equality(&mut c.iter_range, ids);
            unordered_equality(&mut c.accu_init, ids);
            unordered_equality(&mut c.loop_cond, ids);
            unordered_equality(&mut c.loop_step, ids);
            unordered_equality(&mut c.result, ids);
        }
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Equality of two lists that ignores order (set and map lists), else plain equality.
/// `size()` as CEL defines it: the code points of a string (the `cel` crate counts its
/// bytes), the items of a list, the entries of a map, the bytes of bytes.
fn size(
    ftx: &kube_cel::cel::FunctionContext<'_, '_>,
    kube_cel::cel::extractors::This(this): kube_cel::cel::extractors::This<Cel>,
) -> Result<i64, ExecutionError> {
    let size = match this {
        Cel::String(s) => s.chars().count(),
        Cel::List(l) => l.len(),
        Cel::Map(m) => m.map.len(),
        Cel::Bytes(b) => b.len(),
        other => return Err(ftx.error(format!("cannot determine the size of {other:?}"))),
    };
    i64::try_from(size).map_err(|_| ftx.error("size out of range"))
}

fn unordered_eq(a: Cel, b: Cel) -> bool {
    match (&a, &b) {
        (Cel::List(x), Cel::List(y)) => {
            x.len() == y.len() && x.iter().all(|e| y.contains(e)) && y.iter().all(|e| x.contains(e))
        }
        _ => a == b,
    }
}

/// Inequality of two lists that ignores order.
fn unordered_ne(a: Cel, b: Cel) -> bool {
    !unordered_eq(a, b)
}
