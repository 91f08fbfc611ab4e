//! The protobuf shapes of the cluster's kinds: one [`Struct`] per upstream message, each
//! field with its JSON name, its number in upstream's `generated.proto` (core/v1, apps/v1,
//! discovery/v1) and its type. With them genplane's transcoder
//! ([`genplane_apimachinery::codec::protobuf`]) reads and writes Kubernetes protobuf for these kinds, which
//! is what kubectl and client-go send and ask for by default for built-in kinds.
//!
//! The JSON path does not use these schemas: a protobuf body is read into JSON here, and that
//! JSON then goes through the kind's own decoding ([`super::shape`]) like any JSON body.
//!
//! How the table is written:
//! - [`Field::pointer`] marks the scalar fields whose zero value the JSON carries: those Go
//!   declares as pointers (`*int32 replicas`, `*bool allocateLoadBalancerNodePorts`) and
//!   those the kinds' JSON shape (k8s-openapi's types, [`super::shape`]) always writes
//!   (`Container.name`, `ContainerStatus.restartCount`). A zero read from the wire is kept
//!   for them, and left out for every other field, as Go's `omitempty` leaves it out;
//! - [`Field::inline`] marks Go's embedded structs (`LocalObjectReference` in a
//!   `ConfigMapKeySelector`, `VolumeSource` in a `Volume`, `ProbeHandler` in a `Probe`), which
//!   are messages of their own on the wire and flat in JSON;
//! - the object metadata and references are genplane's own schemas ([`OBJECT_META`],
//!   [`OBJECT_REFERENCE`]).
//!
//! The tests check the table against k8s-openapi's 1.33 types (every field they have is
//! here, nothing else, and the zero values they write are kept), and that a JSON fixture of
//! each kind (`testdata/protobuf/`) comes back unchanged from protobuf.

use genplane_api::core::OBJECT_REFERENCE;
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::meta::schemas::{LABEL_SELECTOR, OBJECT_META};

pub static POD: Struct = Struct {
    name: "Pod",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&POD_SPEC)),
        Field::new("status", 3, Type::Struct(&POD_STATUS)),
    ],
};

pub static BINDING: Struct = Struct {
    name: "Binding",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("target", 2, Type::Struct(&OBJECT_REFERENCE)),
    ],
};

pub static NODE: Struct = Struct {
    name: "Node",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&NODE_SPEC)),
        Field::new("status", 3, Type::Struct(&NODE_STATUS)),
    ],
};

pub static SERVICE: Struct = Struct {
    name: "Service",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SERVICE_SPEC)),
        Field::new("status", 3, Type::Struct(&SERVICE_STATUS)),
    ],
};

pub static ENDPOINTS: Struct = Struct {
    name: "Endpoints",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("subsets", 2, Type::List(&Type::Struct(&ENDPOINT_SUBSET))),
    ],
};

pub static ENDPOINT_SLICE: Struct = Struct {
    name: "EndpointSlice",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::pointer("addressType", 4, Type::String),
        Field::new(
            "endpoints",
            2,
            Type::List(&Type::Struct(&DISCOVERY_ENDPOINT)),
        ),
        Field::new(
            "ports",
            3,
            Type::List(&Type::Struct(&DISCOVERY_ENDPOINT_PORT)),
        ),
    ],
};

pub static DEPLOYMENT: Struct = Struct {
    name: "Deployment",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&DEPLOYMENT_SPEC)),
        Field::new("status", 3, Type::Struct(&DEPLOYMENT_STATUS)),
    ],
};

pub static REPLICA_SET: Struct = Struct {
    name: "ReplicaSet",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&REPLICA_SET_SPEC)),
        Field::new("status", 3, Type::Struct(&REPLICA_SET_STATUS)),
    ],
};

static POD_SPEC: Struct = Struct {
    name: "PodSpec",
    fields: &[
        Field::new("volumes", 1, Type::List(&Type::Struct(&VOLUME))),
        Field::new("initContainers", 20, Type::List(&Type::Struct(&CONTAINER))),
        Field::new("containers", 2, Type::List(&Type::Struct(&CONTAINER))),
        Field::new(
            "ephemeralContainers",
            34,
            Type::List(&Type::Struct(&EPHEMERAL_CONTAINER)),
        ),
        Field::new("restartPolicy", 3, Type::String),
        Field::pointer("terminationGracePeriodSeconds", 4, Type::Int64),
        Field::pointer("activeDeadlineSeconds", 5, Type::Int64),
        Field::new("dnsPolicy", 6, Type::String),
        Field::new("nodeSelector", 7, Type::Map(&Type::String)),
        Field::new("serviceAccountName", 8, Type::String),
        Field::new("serviceAccount", 9, Type::String),
        Field::pointer("automountServiceAccountToken", 21, Type::Bool),
        Field::new("nodeName", 10, Type::String),
        Field::new("hostNetwork", 11, Type::Bool),
        Field::new("hostPID", 12, Type::Bool),
        Field::new("hostIPC", 13, Type::Bool),
        Field::pointer("shareProcessNamespace", 27, Type::Bool),
        Field::new("securityContext", 14, Type::Struct(&POD_SECURITY_CONTEXT)),
        Field::new(
            "imagePullSecrets",
            15,
            Type::List(&Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        ),
        Field::new("hostname", 16, Type::String),
        Field::new("subdomain", 17, Type::String),
        Field::new("affinity", 18, Type::Struct(&AFFINITY)),
        Field::new("schedulerName", 19, Type::String),
        Field::new("tolerations", 22, Type::List(&Type::Struct(&TOLERATION))),
        Field::new("hostAliases", 23, Type::List(&Type::Struct(&HOST_ALIAS))),
        Field::new("priorityClassName", 24, Type::String),
        Field::pointer("priority", 25, Type::Int32),
        Field::new("dnsConfig", 26, Type::Struct(&POD_DNS_CONFIG)),
        Field::new(
            "readinessGates",
            28,
            Type::List(&Type::Struct(&POD_READINESS_GATE)),
        ),
        Field::pointer("runtimeClassName", 29, Type::String),
        Field::pointer("enableServiceLinks", 30, Type::Bool),
        Field::pointer("preemptionPolicy", 31, Type::String),
        Field::new("overhead", 32, Type::Map(&Type::Quantity)),
        Field::new(
            "topologySpreadConstraints",
            33,
            Type::List(&Type::Struct(&TOPOLOGY_SPREAD_CONSTRAINT)),
        ),
        Field::pointer("setHostnameAsFQDN", 35, Type::Bool),
        Field::new("os", 36, Type::Struct(&POD_OS)),
        Field::pointer("hostUsers", 37, Type::Bool),
        Field::new(
            "schedulingGates",
            38,
            Type::List(&Type::Struct(&POD_SCHEDULING_GATE)),
        ),
        Field::new(
            "resourceClaims",
            39,
            Type::List(&Type::Struct(&POD_RESOURCE_CLAIM)),
        ),
        Field::new("resources", 40, Type::Struct(&RESOURCE_REQUIREMENTS)),
    ],
};

static POD_STATUS: Struct = Struct {
    name: "PodStatus",
    fields: &[
        Field::new("observedGeneration", 17, Type::Int64),
        Field::new("phase", 1, Type::String),
        Field::new("conditions", 2, Type::List(&Type::Struct(&POD_CONDITION))),
        Field::new("message", 3, Type::String),
        Field::new("reason", 4, Type::String),
        Field::new("nominatedNodeName", 11, Type::String),
        Field::new("hostIP", 5, Type::String),
        Field::new("hostIPs", 16, Type::List(&Type::Struct(&HOST_IP))),
        Field::new("podIP", 6, Type::String),
        Field::new("podIPs", 12, Type::List(&Type::Struct(&POD_IP))),
        Field::new("startTime", 7, Type::Time),
        Field::new(
            "initContainerStatuses",
            10,
            Type::List(&Type::Struct(&CONTAINER_STATUS)),
        ),
        Field::new(
            "containerStatuses",
            8,
            Type::List(&Type::Struct(&CONTAINER_STATUS)),
        ),
        Field::new("qosClass", 9, Type::String),
        Field::new(
            "ephemeralContainerStatuses",
            13,
            Type::List(&Type::Struct(&CONTAINER_STATUS)),
        ),
        Field::new("resize", 14, Type::String),
        Field::new(
            "resourceClaimStatuses",
            15,
            Type::List(&Type::Struct(&POD_RESOURCE_CLAIM_STATUS)),
        ),
    ],
};

static NODE_SPEC: Struct = Struct {
    name: "NodeSpec",
    fields: &[
        Field::new("podCIDR", 1, Type::String),
        Field::new("podCIDRs", 7, Type::List(&Type::String)),
        Field::new("providerID", 3, Type::String),
        Field::new("unschedulable", 4, Type::Bool),
        Field::new("taints", 5, Type::List(&Type::Struct(&TAINT))),
        Field::new("configSource", 6, Type::Struct(&NODE_CONFIG_SOURCE)),
        Field::new("externalID", 2, Type::String),
    ],
};

static NODE_STATUS: Struct = Struct {
    name: "NodeStatus",
    fields: &[
        Field::new("capacity", 1, Type::Map(&Type::Quantity)),
        Field::new("allocatable", 2, Type::Map(&Type::Quantity)),
        Field::new("phase", 3, Type::String),
        Field::new("conditions", 4, Type::List(&Type::Struct(&NODE_CONDITION))),
        Field::new("addresses", 5, Type::List(&Type::Struct(&NODE_ADDRESS))),
        Field::new("daemonEndpoints", 6, Type::Struct(&NODE_DAEMON_ENDPOINTS)),
        Field::new("nodeInfo", 7, Type::Struct(&NODE_SYSTEM_INFO)),
        Field::new("images", 8, Type::List(&Type::Struct(&CONTAINER_IMAGE))),
        Field::new("volumesInUse", 9, Type::List(&Type::String)),
        Field::new(
            "volumesAttached",
            10,
            Type::List(&Type::Struct(&ATTACHED_VOLUME)),
        ),
        Field::new("config", 11, Type::Struct(&NODE_CONFIG_STATUS)),
        Field::new(
            "runtimeHandlers",
            12,
            Type::List(&Type::Struct(&NODE_RUNTIME_HANDLER)),
        ),
        Field::new("features", 13, Type::Struct(&NODE_FEATURES)),
    ],
};

static SERVICE_SPEC: Struct = Struct {
    name: "ServiceSpec",
    fields: &[
        Field::new("ports", 1, Type::List(&Type::Struct(&SERVICE_PORT))),
        Field::new("selector", 2, Type::Map(&Type::String)),
        Field::new("clusterIP", 3, Type::String),
        Field::new("clusterIPs", 18, Type::List(&Type::String)),
        Field::new("type", 4, Type::String),
        Field::new("externalIPs", 5, Type::List(&Type::String)),
        Field::new("sessionAffinity", 7, Type::String),
        Field::new("loadBalancerIP", 8, Type::String),
        Field::new("loadBalancerSourceRanges", 9, Type::List(&Type::String)),
        Field::new("externalName", 10, Type::String),
        Field::new("externalTrafficPolicy", 11, Type::String),
        Field::new("healthCheckNodePort", 12, Type::Int32),
        Field::new("publishNotReadyAddresses", 13, Type::Bool),
        Field::new(
            "sessionAffinityConfig",
            14,
            Type::Struct(&SESSION_AFFINITY_CONFIG),
        ),
        Field::new("ipFamilies", 19, Type::List(&Type::String)),
        Field::pointer("ipFamilyPolicy", 17, Type::String),
        Field::pointer("allocateLoadBalancerNodePorts", 20, Type::Bool),
        Field::pointer("loadBalancerClass", 21, Type::String),
        Field::pointer("internalTrafficPolicy", 22, Type::String),
        Field::pointer("trafficDistribution", 23, Type::String),
    ],
};

static SERVICE_STATUS: Struct = Struct {
    name: "ServiceStatus",
    fields: &[
        Field::new("loadBalancer", 1, Type::Struct(&LOAD_BALANCER_STATUS)),
        Field::new("conditions", 2, Type::List(&Type::Struct(&META_CONDITION))),
    ],
};

static ENDPOINT_SUBSET: Struct = Struct {
    name: "EndpointSubset",
    fields: &[
        Field::new("addresses", 1, Type::List(&Type::Struct(&ENDPOINT_ADDRESS))),
        Field::new(
            "notReadyAddresses",
            2,
            Type::List(&Type::Struct(&ENDPOINT_ADDRESS)),
        ),
        Field::new("ports", 3, Type::List(&Type::Struct(&ENDPOINT_PORT))),
    ],
};

static DISCOVERY_ENDPOINT: Struct = Struct {
    name: "Endpoint",
    fields: &[
        Field::new("addresses", 1, Type::List(&Type::String)),
        Field::new("conditions", 2, Type::Struct(&ENDPOINT_CONDITIONS)),
        Field::pointer("hostname", 3, Type::String),
        Field::new("targetRef", 4, Type::Struct(&OBJECT_REFERENCE)),
        Field::new("deprecatedTopology", 5, Type::Map(&Type::String)),
        Field::pointer("nodeName", 6, Type::String),
        Field::pointer("zone", 7, Type::String),
        Field::new("hints", 8, Type::Struct(&ENDPOINT_HINTS)),
    ],
};

static DISCOVERY_ENDPOINT_PORT: Struct = Struct {
    name: "EndpointPort",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("protocol", 2, Type::String),
        Field::pointer("port", 3, Type::Int32),
        Field::pointer("appProtocol", 4, Type::String),
    ],
};

static DEPLOYMENT_SPEC: Struct = Struct {
    name: "DeploymentSpec",
    fields: &[
        Field::pointer("replicas", 1, Type::Int32),
        Field::new("selector", 2, Type::Struct(&LABEL_SELECTOR)),
        Field::new("template", 3, Type::Struct(&POD_TEMPLATE_SPEC)),
        Field::new("strategy", 4, Type::Struct(&DEPLOYMENT_STRATEGY)),
        Field::new("minReadySeconds", 5, Type::Int32),
        Field::pointer("revisionHistoryLimit", 6, Type::Int32),
        Field::new("paused", 7, Type::Bool),
        Field::pointer("progressDeadlineSeconds", 9, Type::Int32),
    ],
};

static DEPLOYMENT_STATUS: Struct = Struct {
    name: "DeploymentStatus",
    fields: &[
        Field::new("observedGeneration", 1, Type::Int64),
        Field::new("replicas", 2, Type::Int32),
        Field::new("updatedReplicas", 3, Type::Int32),
        Field::new("readyReplicas", 7, Type::Int32),
        Field::new("availableReplicas", 4, Type::Int32),
        Field::new("unavailableReplicas", 5, Type::Int32),
        Field::pointer("terminatingReplicas", 9, Type::Int32),
        Field::new(
            "conditions",
            6,
            Type::List(&Type::Struct(&DEPLOYMENT_CONDITION)),
        ),
        Field::pointer("collisionCount", 8, Type::Int32),
    ],
};

static REPLICA_SET_SPEC: Struct = Struct {
    name: "ReplicaSetSpec",
    fields: &[
        Field::pointer("replicas", 1, Type::Int32),
        Field::new("minReadySeconds", 4, Type::Int32),
        Field::new("selector", 2, Type::Struct(&LABEL_SELECTOR)),
        Field::new("template", 3, Type::Struct(&POD_TEMPLATE_SPEC)),
    ],
};

static REPLICA_SET_STATUS: Struct = Struct {
    name: "ReplicaSetStatus",
    fields: &[
        Field::pointer("replicas", 1, Type::Int32),
        Field::new("fullyLabeledReplicas", 2, Type::Int32),
        Field::new("readyReplicas", 4, Type::Int32),
        Field::new("availableReplicas", 5, Type::Int32),
        Field::pointer("terminatingReplicas", 7, Type::Int32),
        Field::new("observedGeneration", 3, Type::Int64),
        Field::new(
            "conditions",
            6,
            Type::List(&Type::Struct(&REPLICA_SET_CONDITION)),
        ),
    ],
};

static VOLUME: Struct = Struct {
    name: "Volume",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::inline(2, &VOLUME_SOURCE),
    ],
};

static CONTAINER: Struct = Struct {
    name: "Container",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("image", 2, Type::String),
        Field::new("command", 3, Type::List(&Type::String)),
        Field::new("args", 4, Type::List(&Type::String)),
        Field::new("workingDir", 5, Type::String),
        Field::new("ports", 6, Type::List(&Type::Struct(&CONTAINER_PORT))),
        Field::new("envFrom", 19, Type::List(&Type::Struct(&ENV_FROM_SOURCE))),
        Field::new("env", 7, Type::List(&Type::Struct(&ENV_VAR))),
        Field::new("resources", 8, Type::Struct(&RESOURCE_REQUIREMENTS)),
        Field::new(
            "resizePolicy",
            23,
            Type::List(&Type::Struct(&CONTAINER_RESIZE_POLICY)),
        ),
        Field::pointer("restartPolicy", 24, Type::String),
        Field::new("volumeMounts", 9, Type::List(&Type::Struct(&VOLUME_MOUNT))),
        Field::new(
            "volumeDevices",
            21,
            Type::List(&Type::Struct(&VOLUME_DEVICE)),
        ),
        Field::new("livenessProbe", 10, Type::Struct(&PROBE)),
        Field::new("readinessProbe", 11, Type::Struct(&PROBE)),
        Field::new("startupProbe", 22, Type::Struct(&PROBE)),
        Field::new("lifecycle", 12, Type::Struct(&LIFECYCLE)),
        Field::new("terminationMessagePath", 13, Type::String),
        Field::new("terminationMessagePolicy", 20, Type::String),
        Field::new("imagePullPolicy", 14, Type::String),
        Field::new("securityContext", 15, Type::Struct(&SECURITY_CONTEXT)),
        Field::new("stdin", 16, Type::Bool),
        Field::new("stdinOnce", 17, Type::Bool),
        Field::new("tty", 18, Type::Bool),
    ],
};

static EPHEMERAL_CONTAINER: Struct = Struct {
    name: "EphemeralContainer",
    fields: &[
        Field::inline(1, &CONTAINER),
        Field::new("targetContainerName", 2, Type::String),
    ],
};

static POD_SECURITY_CONTEXT: Struct = Struct {
    name: "PodSecurityContext",
    fields: &[
        Field::new("seLinuxOptions", 1, Type::Struct(&SE_LINUX_OPTIONS)),
        Field::new(
            "windowsOptions",
            8,
            Type::Struct(&WINDOWS_SECURITY_CONTEXT_OPTIONS),
        ),
        Field::pointer("runAsUser", 2, Type::Int64),
        Field::pointer("runAsGroup", 6, Type::Int64),
        Field::pointer("runAsNonRoot", 3, Type::Bool),
        Field::new("supplementalGroups", 4, Type::List(&Type::Int64)),
        Field::pointer("supplementalGroupsPolicy", 12, Type::String),
        Field::pointer("fsGroup", 5, Type::Int64),
        Field::new("sysctls", 7, Type::List(&Type::Struct(&SYSCTL))),
        Field::pointer("fsGroupChangePolicy", 9, Type::String),
        Field::new("seccompProfile", 10, Type::Struct(&SECCOMP_PROFILE)),
        Field::new("appArmorProfile", 11, Type::Struct(&APP_ARMOR_PROFILE)),
        Field::pointer("seLinuxChangePolicy", 13, Type::String),
    ],
};

static LOCAL_OBJECT_REFERENCE: Struct = Struct {
    name: "LocalObjectReference",
    fields: &[Field::pointer("name", 1, Type::String)],
};

static AFFINITY: Struct = Struct {
    name: "Affinity",
    fields: &[
        Field::new("nodeAffinity", 1, Type::Struct(&NODE_AFFINITY)),
        Field::new("podAffinity", 2, Type::Struct(&POD_AFFINITY)),
        Field::new("podAntiAffinity", 3, Type::Struct(&POD_ANTI_AFFINITY)),
    ],
};

static TOLERATION: Struct = Struct {
    name: "Toleration",
    fields: &[
        Field::new("key", 1, Type::String),
        Field::new("operator", 2, Type::String),
        Field::new("value", 3, Type::String),
        Field::new("effect", 4, Type::String),
        Field::pointer("tolerationSeconds", 5, Type::Int64),
    ],
};

static HOST_ALIAS: Struct = Struct {
    name: "HostAlias",
    fields: &[
        Field::pointer("ip", 1, Type::String),
        Field::new("hostnames", 2, Type::List(&Type::String)),
    ],
};

static POD_DNS_CONFIG: Struct = Struct {
    name: "PodDNSConfig",
    fields: &[
        Field::new("nameservers", 1, Type::List(&Type::String)),
        Field::new("searches", 2, Type::List(&Type::String)),
        Field::new(
            "options",
            3,
            Type::List(&Type::Struct(&POD_DNS_CONFIG_OPTION)),
        ),
    ],
};

static POD_READINESS_GATE: Struct = Struct {
    name: "PodReadinessGate",
    fields: &[Field::pointer("conditionType", 1, Type::String)],
};

static TOPOLOGY_SPREAD_CONSTRAINT: Struct = Struct {
    name: "TopologySpreadConstraint",
    fields: &[
        Field::pointer("maxSkew", 1, Type::Int32),
        Field::pointer("topologyKey", 2, Type::String),
        Field::pointer("whenUnsatisfiable", 3, Type::String),
        Field::new("labelSelector", 4, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("minDomains", 5, Type::Int32),
        Field::pointer("nodeAffinityPolicy", 6, Type::String),
        Field::pointer("nodeTaintsPolicy", 7, Type::String),
        Field::new("matchLabelKeys", 8, Type::List(&Type::String)),
    ],
};

static POD_OS: Struct = Struct {
    name: "PodOS",
    fields: &[Field::pointer("name", 1, Type::String)],
};

static POD_SCHEDULING_GATE: Struct = Struct {
    name: "PodSchedulingGate",
    fields: &[Field::pointer("name", 1, Type::String)],
};

static POD_RESOURCE_CLAIM: Struct = Struct {
    name: "PodResourceClaim",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("resourceClaimName", 3, Type::String),
        Field::pointer("resourceClaimTemplateName", 4, Type::String),
    ],
};

static RESOURCE_REQUIREMENTS: Struct = Struct {
    name: "ResourceRequirements",
    fields: &[
        Field::new("limits", 1, Type::Map(&Type::Quantity)),
        Field::new("requests", 2, Type::Map(&Type::Quantity)),
        Field::new("claims", 3, Type::List(&Type::Struct(&RESOURCE_CLAIM))),
    ],
};

static POD_CONDITION: Struct = Struct {
    name: "PodCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::new("observedGeneration", 7, Type::Int64),
        Field::pointer("status", 2, Type::String),
        Field::new("lastProbeTime", 3, Type::Time),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::new("reason", 5, Type::String),
        Field::new("message", 6, Type::String),
    ],
};

static HOST_IP: Struct = Struct {
    name: "HostIP",
    fields: &[Field::pointer("ip", 1, Type::String)],
};

static POD_IP: Struct = Struct {
    name: "PodIP",
    fields: &[Field::pointer("ip", 1, Type::String)],
};

static CONTAINER_STATUS: Struct = Struct {
    name: "ContainerStatus",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("state", 2, Type::Struct(&CONTAINER_STATE)),
        Field::new("lastState", 3, Type::Struct(&CONTAINER_STATE)),
        Field::pointer("ready", 4, Type::Bool),
        Field::pointer("restartCount", 5, Type::Int32),
        Field::pointer("image", 6, Type::String),
        Field::pointer("imageID", 7, Type::String),
        Field::new("containerID", 8, Type::String),
        Field::pointer("started", 9, Type::Bool),
        Field::new("allocatedResources", 10, Type::Map(&Type::Quantity)),
        Field::new("resources", 11, Type::Struct(&RESOURCE_REQUIREMENTS)),
        Field::new(
            "volumeMounts",
            12,
            Type::List(&Type::Struct(&VOLUME_MOUNT_STATUS)),
        ),
        Field::new("user", 13, Type::Struct(&CONTAINER_USER)),
        Field::new(
            "allocatedResourcesStatus",
            14,
            Type::List(&Type::Struct(&RESOURCE_STATUS)),
        ),
        Field::pointer("stopSignal", 15, Type::String),
    ],
};

static POD_RESOURCE_CLAIM_STATUS: Struct = Struct {
    name: "PodResourceClaimStatus",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("resourceClaimName", 2, Type::String),
    ],
};

static TAINT: Struct = Struct {
    name: "Taint",
    fields: &[
        Field::pointer("key", 1, Type::String),
        Field::new("value", 2, Type::String),
        Field::pointer("effect", 3, Type::String),
        Field::new("timeAdded", 4, Type::Time),
    ],
};

static NODE_CONFIG_SOURCE: Struct = Struct {
    name: "NodeConfigSource",
    fields: &[Field::new(
        "configMap",
        2,
        Type::Struct(&CONFIG_MAP_NODE_CONFIG_SOURCE),
    )],
};

static NODE_CONDITION: Struct = Struct {
    name: "NodeCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("lastHeartbeatTime", 3, Type::Time),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::new("reason", 5, Type::String),
        Field::new("message", 6, Type::String),
    ],
};

static NODE_ADDRESS: Struct = Struct {
    name: "NodeAddress",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("address", 2, Type::String),
    ],
};

static NODE_DAEMON_ENDPOINTS: Struct = Struct {
    name: "NodeDaemonEndpoints",
    fields: &[Field::new(
        "kubeletEndpoint",
        1,
        Type::Struct(&DAEMON_ENDPOINT),
    )],
};

static NODE_SYSTEM_INFO: Struct = Struct {
    name: "NodeSystemInfo",
    fields: &[
        Field::pointer("machineID", 1, Type::String),
        Field::pointer("systemUUID", 2, Type::String),
        Field::pointer("bootID", 3, Type::String),
        Field::pointer("kernelVersion", 4, Type::String),
        Field::pointer("osImage", 5, Type::String),
        Field::pointer("containerRuntimeVersion", 6, Type::String),
        Field::pointer("kubeletVersion", 7, Type::String),
        Field::pointer("kubeProxyVersion", 8, Type::String),
        Field::pointer("operatingSystem", 9, Type::String),
        Field::pointer("architecture", 10, Type::String),
        Field::new("swap", 11, Type::Struct(&NODE_SWAP_STATUS)),
    ],
};

static CONTAINER_IMAGE: Struct = Struct {
    name: "ContainerImage",
    fields: &[
        Field::new("names", 1, Type::List(&Type::String)),
        Field::new("sizeBytes", 2, Type::Int64),
    ],
};

static ATTACHED_VOLUME: Struct = Struct {
    name: "AttachedVolume",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("devicePath", 2, Type::String),
    ],
};

static NODE_CONFIG_STATUS: Struct = Struct {
    name: "NodeConfigStatus",
    fields: &[
        Field::new("assigned", 1, Type::Struct(&NODE_CONFIG_SOURCE)),
        Field::new("active", 2, Type::Struct(&NODE_CONFIG_SOURCE)),
        Field::new("lastKnownGood", 3, Type::Struct(&NODE_CONFIG_SOURCE)),
        Field::new("error", 4, Type::String),
    ],
};

static NODE_RUNTIME_HANDLER: Struct = Struct {
    name: "NodeRuntimeHandler",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("features", 2, Type::Struct(&NODE_RUNTIME_HANDLER_FEATURES)),
    ],
};

static NODE_FEATURES: Struct = Struct {
    name: "NodeFeatures",
    fields: &[Field::pointer("supplementalGroupsPolicy", 1, Type::Bool)],
};

static SERVICE_PORT: Struct = Struct {
    name: "ServicePort",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("protocol", 2, Type::String),
        Field::pointer("appProtocol", 6, Type::String),
        Field::pointer("port", 3, Type::Int32),
        Field::new("targetPort", 4, Type::IntOrString),
        Field::new("nodePort", 5, Type::Int32),
    ],
};

static SESSION_AFFINITY_CONFIG: Struct = Struct {
    name: "SessionAffinityConfig",
    fields: &[Field::new("clientIP", 1, Type::Struct(&CLIENT_IP_CONFIG))],
};

static LOAD_BALANCER_STATUS: Struct = Struct {
    name: "LoadBalancerStatus",
    fields: &[Field::new(
        "ingress",
        1,
        Type::List(&Type::Struct(&LOAD_BALANCER_INGRESS)),
    )],
};

static META_CONDITION: Struct = Struct {
    name: "Condition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("observedGeneration", 3, Type::Int64),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::pointer("reason", 5, Type::String),
        Field::pointer("message", 6, Type::String),
    ],
};

static ENDPOINT_ADDRESS: Struct = Struct {
    name: "EndpointAddress",
    fields: &[
        Field::pointer("ip", 1, Type::String),
        Field::new("hostname", 3, Type::String),
        Field::pointer("nodeName", 4, Type::String),
        Field::new("targetRef", 2, Type::Struct(&OBJECT_REFERENCE)),
    ],
};

static ENDPOINT_PORT: Struct = Struct {
    name: "EndpointPort",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::pointer("port", 2, Type::Int32),
        Field::new("protocol", 3, Type::String),
        Field::pointer("appProtocol", 4, Type::String),
    ],
};

static ENDPOINT_CONDITIONS: Struct = Struct {
    name: "EndpointConditions",
    fields: &[
        Field::pointer("ready", 1, Type::Bool),
        Field::pointer("serving", 2, Type::Bool),
        Field::pointer("terminating", 3, Type::Bool),
    ],
};

static ENDPOINT_HINTS: Struct = Struct {
    name: "EndpointHints",
    fields: &[
        Field::new("forZones", 1, Type::List(&Type::Struct(&FOR_ZONE))),
        Field::new("forNodes", 2, Type::List(&Type::Struct(&FOR_NODE))),
    ],
};

static POD_TEMPLATE_SPEC: Struct = Struct {
    name: "PodTemplateSpec",
    fields: &[
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&POD_SPEC)),
    ],
};

static DEPLOYMENT_STRATEGY: Struct = Struct {
    name: "DeploymentStrategy",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("rollingUpdate", 2, Type::Struct(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static DEPLOYMENT_CONDITION: Struct = Struct {
    name: "DeploymentCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("lastUpdateTime", 6, Type::Time),
        Field::new("lastTransitionTime", 7, Type::Time),
        Field::new("reason", 4, Type::String),
        Field::new("message", 5, Type::String),
    ],
};

static REPLICA_SET_CONDITION: Struct = Struct {
    name: "ReplicaSetCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("lastTransitionTime", 3, Type::Time),
        Field::new("reason", 4, Type::String),
        Field::new("message", 5, Type::String),
    ],
};

static VOLUME_SOURCE: Struct = Struct {
    name: "VolumeSource",
    fields: &[
        Field::new("hostPath", 1, Type::Struct(&HOST_PATH_VOLUME_SOURCE)),
        Field::new("emptyDir", 2, Type::Struct(&EMPTY_DIR_VOLUME_SOURCE)),
        Field::new(
            "gcePersistentDisk",
            3,
            Type::Struct(&GCE_PERSISTENT_DISK_VOLUME_SOURCE),
        ),
        Field::new(
            "awsElasticBlockStore",
            4,
            Type::Struct(&AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE),
        ),
        Field::new("gitRepo", 5, Type::Struct(&GIT_REPO_VOLUME_SOURCE)),
        Field::new("secret", 6, Type::Struct(&SECRET_VOLUME_SOURCE)),
        Field::new("nfs", 7, Type::Struct(&NFS_VOLUME_SOURCE)),
        Field::new("iscsi", 8, Type::Struct(&ISCSI_VOLUME_SOURCE)),
        Field::new("glusterfs", 9, Type::Struct(&GLUSTERFS_VOLUME_SOURCE)),
        Field::new(
            "persistentVolumeClaim",
            10,
            Type::Struct(&PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE),
        ),
        Field::new("rbd", 11, Type::Struct(&RBD_VOLUME_SOURCE)),
        Field::new("flexVolume", 12, Type::Struct(&FLEX_VOLUME_SOURCE)),
        Field::new("cinder", 13, Type::Struct(&CINDER_VOLUME_SOURCE)),
        Field::new("cephfs", 14, Type::Struct(&CEPH_FS_VOLUME_SOURCE)),
        Field::new("flocker", 15, Type::Struct(&FLOCKER_VOLUME_SOURCE)),
        Field::new("downwardAPI", 16, Type::Struct(&DOWNWARD_API_VOLUME_SOURCE)),
        Field::new("fc", 17, Type::Struct(&FC_VOLUME_SOURCE)),
        Field::new("azureFile", 18, Type::Struct(&AZURE_FILE_VOLUME_SOURCE)),
        Field::new("configMap", 19, Type::Struct(&CONFIG_MAP_VOLUME_SOURCE)),
        Field::new(
            "vsphereVolume",
            20,
            Type::Struct(&VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE),
        ),
        Field::new("quobyte", 21, Type::Struct(&QUOBYTE_VOLUME_SOURCE)),
        Field::new("azureDisk", 22, Type::Struct(&AZURE_DISK_VOLUME_SOURCE)),
        Field::new(
            "photonPersistentDisk",
            23,
            Type::Struct(&PHOTON_PERSISTENT_DISK_VOLUME_SOURCE),
        ),
        Field::new("projected", 26, Type::Struct(&PROJECTED_VOLUME_SOURCE)),
        Field::new("portworxVolume", 24, Type::Struct(&PORTWORX_VOLUME_SOURCE)),
        Field::new("scaleIO", 25, Type::Struct(&SCALE_IO_VOLUME_SOURCE)),
        Field::new("storageos", 27, Type::Struct(&STORAGE_OS_VOLUME_SOURCE)),
        Field::new("csi", 28, Type::Struct(&CSI_VOLUME_SOURCE)),
        Field::new("ephemeral", 29, Type::Struct(&EPHEMERAL_VOLUME_SOURCE)),
        Field::new("image", 30, Type::Struct(&IMAGE_VOLUME_SOURCE)),
    ],
};

static CONTAINER_PORT: Struct = Struct {
    name: "ContainerPort",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("hostPort", 2, Type::Int32),
        Field::pointer("containerPort", 3, Type::Int32),
        Field::new("protocol", 4, Type::String),
        Field::new("hostIP", 5, Type::String),
    ],
};

static ENV_FROM_SOURCE: Struct = Struct {
    name: "EnvFromSource",
    fields: &[
        Field::new("prefix", 1, Type::String),
        Field::new("configMapRef", 2, Type::Struct(&CONFIG_MAP_ENV_SOURCE)),
        Field::new("secretRef", 3, Type::Struct(&SECRET_ENV_SOURCE)),
    ],
};

static ENV_VAR: Struct = Struct {
    name: "EnvVar",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("value", 2, Type::String),
        Field::new("valueFrom", 3, Type::Struct(&ENV_VAR_SOURCE)),
    ],
};

static CONTAINER_RESIZE_POLICY: Struct = Struct {
    name: "ContainerResizePolicy",
    fields: &[
        Field::pointer("resourceName", 1, Type::String),
        Field::pointer("restartPolicy", 2, Type::String),
    ],
};

static VOLUME_MOUNT: Struct = Struct {
    name: "VolumeMount",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("readOnly", 2, Type::Bool),
        Field::pointer("recursiveReadOnly", 7, Type::String),
        Field::pointer("mountPath", 3, Type::String),
        Field::new("subPath", 4, Type::String),
        Field::pointer("mountPropagation", 5, Type::String),
        Field::new("subPathExpr", 6, Type::String),
    ],
};

static VOLUME_DEVICE: Struct = Struct {
    name: "VolumeDevice",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("devicePath", 2, Type::String),
    ],
};

static PROBE: Struct = Struct {
    name: "Probe",
    fields: &[
        Field::inline(1, &PROBE_HANDLER),
        Field::new("initialDelaySeconds", 2, Type::Int32),
        Field::new("timeoutSeconds", 3, Type::Int32),
        Field::new("periodSeconds", 4, Type::Int32),
        Field::new("successThreshold", 5, Type::Int32),
        Field::new("failureThreshold", 6, Type::Int32),
        Field::pointer("terminationGracePeriodSeconds", 7, Type::Int64),
    ],
};

static LIFECYCLE: Struct = Struct {
    name: "Lifecycle",
    fields: &[
        Field::new("postStart", 1, Type::Struct(&LIFECYCLE_HANDLER)),
        Field::new("preStop", 2, Type::Struct(&LIFECYCLE_HANDLER)),
        Field::pointer("stopSignal", 3, Type::String),
    ],
};

static SECURITY_CONTEXT: Struct = Struct {
    name: "SecurityContext",
    fields: &[
        Field::new("capabilities", 1, Type::Struct(&CAPABILITIES)),
        Field::pointer("privileged", 2, Type::Bool),
        Field::new("seLinuxOptions", 3, Type::Struct(&SE_LINUX_OPTIONS)),
        Field::new(
            "windowsOptions",
            10,
            Type::Struct(&WINDOWS_SECURITY_CONTEXT_OPTIONS),
        ),
        Field::pointer("runAsUser", 4, Type::Int64),
        Field::pointer("runAsGroup", 8, Type::Int64),
        Field::pointer("runAsNonRoot", 5, Type::Bool),
        Field::pointer("readOnlyRootFilesystem", 6, Type::Bool),
        Field::pointer("allowPrivilegeEscalation", 7, Type::Bool),
        Field::pointer("procMount", 9, Type::String),
        Field::new("seccompProfile", 11, Type::Struct(&SECCOMP_PROFILE)),
        Field::new("appArmorProfile", 12, Type::Struct(&APP_ARMOR_PROFILE)),
    ],
};

static SE_LINUX_OPTIONS: Struct = Struct {
    name: "SELinuxOptions",
    fields: &[
        Field::new("user", 1, Type::String),
        Field::new("role", 2, Type::String),
        Field::new("type", 3, Type::String),
        Field::new("level", 4, Type::String),
    ],
};

static WINDOWS_SECURITY_CONTEXT_OPTIONS: Struct = Struct {
    name: "WindowsSecurityContextOptions",
    fields: &[
        Field::pointer("gmsaCredentialSpecName", 1, Type::String),
        Field::pointer("gmsaCredentialSpec", 2, Type::String),
        Field::pointer("runAsUserName", 3, Type::String),
        Field::pointer("hostProcess", 4, Type::Bool),
    ],
};

static SYSCTL: Struct = Struct {
    name: "Sysctl",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("value", 2, Type::String),
    ],
};

static SECCOMP_PROFILE: Struct = Struct {
    name: "SeccompProfile",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("localhostProfile", 2, Type::String),
    ],
};

static APP_ARMOR_PROFILE: Struct = Struct {
    name: "AppArmorProfile",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("localhostProfile", 2, Type::String),
    ],
};

static NODE_AFFINITY: Struct = Struct {
    name: "NodeAffinity",
    fields: &[
        Field::new(
            "requiredDuringSchedulingIgnoredDuringExecution",
            1,
            Type::Struct(&NODE_SELECTOR),
        ),
        Field::new(
            "preferredDuringSchedulingIgnoredDuringExecution",
            2,
            Type::List(&Type::Struct(&PREFERRED_SCHEDULING_TERM)),
        ),
    ],
};

static POD_AFFINITY: Struct = Struct {
    name: "PodAffinity",
    fields: &[
        Field::new(
            "requiredDuringSchedulingIgnoredDuringExecution",
            1,
            Type::List(&Type::Struct(&POD_AFFINITY_TERM)),
        ),
        Field::new(
            "preferredDuringSchedulingIgnoredDuringExecution",
            2,
            Type::List(&Type::Struct(&WEIGHTED_POD_AFFINITY_TERM)),
        ),
    ],
};

static POD_ANTI_AFFINITY: Struct = Struct {
    name: "PodAntiAffinity",
    fields: &[
        Field::new(
            "requiredDuringSchedulingIgnoredDuringExecution",
            1,
            Type::List(&Type::Struct(&POD_AFFINITY_TERM)),
        ),
        Field::new(
            "preferredDuringSchedulingIgnoredDuringExecution",
            2,
            Type::List(&Type::Struct(&WEIGHTED_POD_AFFINITY_TERM)),
        ),
    ],
};

static POD_DNS_CONFIG_OPTION: Struct = Struct {
    name: "PodDNSConfigOption",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::pointer("value", 2, Type::String),
    ],
};

static RESOURCE_CLAIM: Struct = Struct {
    name: "ResourceClaim",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("request", 2, Type::String),
    ],
};

static CONTAINER_STATE: Struct = Struct {
    name: "ContainerState",
    fields: &[
        Field::new("waiting", 1, Type::Struct(&CONTAINER_STATE_WAITING)),
        Field::new("running", 2, Type::Struct(&CONTAINER_STATE_RUNNING)),
        Field::new("terminated", 3, Type::Struct(&CONTAINER_STATE_TERMINATED)),
    ],
};

static VOLUME_MOUNT_STATUS: Struct = Struct {
    name: "VolumeMountStatus",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("mountPath", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
        Field::pointer("recursiveReadOnly", 4, Type::String),
    ],
};

static CONTAINER_USER: Struct = Struct {
    name: "ContainerUser",
    fields: &[Field::new("linux", 1, Type::Struct(&LINUX_CONTAINER_USER))],
};

static RESOURCE_STATUS: Struct = Struct {
    name: "ResourceStatus",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::new("resources", 2, Type::List(&Type::Struct(&RESOURCE_HEALTH))),
    ],
};

static CONFIG_MAP_NODE_CONFIG_SOURCE: Struct = Struct {
    name: "ConfigMapNodeConfigSource",
    fields: &[
        Field::pointer("namespace", 1, Type::String),
        Field::pointer("name", 2, Type::String),
        Field::new("uid", 3, Type::String),
        Field::new("resourceVersion", 4, Type::String),
        Field::pointer("kubeletConfigKey", 5, Type::String),
    ],
};

static DAEMON_ENDPOINT: Struct = Struct {
    name: "DaemonEndpoint",
    fields: &[Field::pointer("Port", 1, Type::Int32)],
};

static NODE_SWAP_STATUS: Struct = Struct {
    name: "NodeSwapStatus",
    fields: &[Field::pointer("capacity", 1, Type::Int64)],
};

static NODE_RUNTIME_HANDLER_FEATURES: Struct = Struct {
    name: "NodeRuntimeHandlerFeatures",
    fields: &[
        Field::pointer("recursiveReadOnlyMounts", 1, Type::Bool),
        Field::pointer("userNamespaces", 2, Type::Bool),
    ],
};

static CLIENT_IP_CONFIG: Struct = Struct {
    name: "ClientIPConfig",
    fields: &[Field::pointer("timeoutSeconds", 1, Type::Int32)],
};

static LOAD_BALANCER_INGRESS: Struct = Struct {
    name: "LoadBalancerIngress",
    fields: &[
        Field::new("ip", 1, Type::String),
        Field::new("hostname", 2, Type::String),
        Field::pointer("ipMode", 3, Type::String),
        Field::new("ports", 4, Type::List(&Type::Struct(&PORT_STATUS))),
    ],
};

static FOR_ZONE: Struct = Struct {
    name: "ForZone",
    fields: &[Field::pointer("name", 1, Type::String)],
};

static FOR_NODE: Struct = Struct {
    name: "ForNode",
    fields: &[Field::pointer("name", 1, Type::String)],
};

static ROLLING_UPDATE_DEPLOYMENT: Struct = Struct {
    name: "RollingUpdateDeployment",
    fields: &[
        Field::new("maxUnavailable", 1, Type::IntOrString),
        Field::new("maxSurge", 2, Type::IntOrString),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Struct = Struct {
    name: "HostPathVolumeSource",
    fields: &[
        Field::pointer("path", 1, Type::String),
        Field::pointer("type", 2, Type::String),
    ],
};

static EMPTY_DIR_VOLUME_SOURCE: Struct = Struct {
    name: "EmptyDirVolumeSource",
    fields: &[
        Field::new("medium", 1, Type::String),
        Field::new("sizeLimit", 2, Type::Quantity),
    ],
};

static GCE_PERSISTENT_DISK_VOLUME_SOURCE: Struct = Struct {
    name: "GCEPersistentDiskVolumeSource",
    fields: &[
        Field::pointer("pdName", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("partition", 3, Type::Int32),
        Field::new("readOnly", 4, Type::Bool),
    ],
};

static AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Struct = Struct {
    name: "AWSElasticBlockStoreVolumeSource",
    fields: &[
        Field::pointer("volumeID", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("partition", 3, Type::Int32),
        Field::new("readOnly", 4, Type::Bool),
    ],
};

static GIT_REPO_VOLUME_SOURCE: Struct = Struct {
    name: "GitRepoVolumeSource",
    fields: &[
        Field::pointer("repository", 1, Type::String),
        Field::new("revision", 2, Type::String),
        Field::new("directory", 3, Type::String),
    ],
};

static SECRET_VOLUME_SOURCE: Struct = Struct {
    name: "SecretVolumeSource",
    fields: &[
        Field::new("secretName", 1, Type::String),
        Field::new("items", 2, Type::List(&Type::Struct(&KEY_TO_PATH))),
        Field::pointer("defaultMode", 3, Type::Int32),
        Field::pointer("optional", 4, Type::Bool),
    ],
};

static NFS_VOLUME_SOURCE: Struct = Struct {
    name: "NFSVolumeSource",
    fields: &[
        Field::pointer("server", 1, Type::String),
        Field::pointer("path", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
    ],
};

static ISCSI_VOLUME_SOURCE: Struct = Struct {
    name: "ISCSIVolumeSource",
    fields: &[
        Field::pointer("targetPortal", 1, Type::String),
        Field::pointer("iqn", 2, Type::String),
        Field::pointer("lun", 3, Type::Int32),
        Field::new("iscsiInterface", 4, Type::String),
        Field::new("fsType", 5, Type::String),
        Field::new("readOnly", 6, Type::Bool),
        Field::new("portals", 7, Type::List(&Type::String)),
        Field::new("chapAuthDiscovery", 8, Type::Bool),
        Field::new("chapAuthSession", 11, Type::Bool),
        Field::new("secretRef", 10, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        Field::pointer("initiatorName", 12, Type::String),
    ],
};

static GLUSTERFS_VOLUME_SOURCE: Struct = Struct {
    name: "GlusterfsVolumeSource",
    fields: &[
        Field::pointer("endpoints", 1, Type::String),
        Field::pointer("path", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
    ],
};

static PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Struct = Struct {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[
        Field::pointer("claimName", 1, Type::String),
        Field::new("readOnly", 2, Type::Bool),
    ],
};

static RBD_VOLUME_SOURCE: Struct = Struct {
    name: "RBDVolumeSource",
    fields: &[
        Field::new("monitors", 1, Type::List(&Type::String)),
        Field::pointer("image", 2, Type::String),
        Field::new("fsType", 3, Type::String),
        Field::new("pool", 4, Type::String),
        Field::new("user", 5, Type::String),
        Field::new("keyring", 6, Type::String),
        Field::new("secretRef", 7, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        Field::new("readOnly", 8, Type::Bool),
    ],
};

static FLEX_VOLUME_SOURCE: Struct = Struct {
    name: "FlexVolumeSource",
    fields: &[
        Field::pointer("driver", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("secretRef", 3, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        Field::new("readOnly", 4, Type::Bool),
        Field::new("options", 5, Type::Map(&Type::String)),
    ],
};

static CINDER_VOLUME_SOURCE: Struct = Struct {
    name: "CinderVolumeSource",
    fields: &[
        Field::pointer("volumeID", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
        Field::new("secretRef", 4, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
    ],
};

static CEPH_FS_VOLUME_SOURCE: Struct = Struct {
    name: "CephFSVolumeSource",
    fields: &[
        Field::new("monitors", 1, Type::List(&Type::String)),
        Field::new("path", 2, Type::String),
        Field::new("user", 3, Type::String),
        Field::new("secretFile", 4, Type::String),
        Field::new("secretRef", 5, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        Field::new("readOnly", 6, Type::Bool),
    ],
};

static FLOCKER_VOLUME_SOURCE: Struct = Struct {
    name: "FlockerVolumeSource",
    fields: &[
        Field::new("datasetName", 1, Type::String),
        Field::new("datasetUUID", 2, Type::String),
    ],
};

static DOWNWARD_API_VOLUME_SOURCE: Struct = Struct {
    name: "DownwardAPIVolumeSource",
    fields: &[
        Field::new(
            "items",
            1,
            Type::List(&Type::Struct(&DOWNWARD_API_VOLUME_FILE)),
        ),
        Field::pointer("defaultMode", 2, Type::Int32),
    ],
};

static FC_VOLUME_SOURCE: Struct = Struct {
    name: "FCVolumeSource",
    fields: &[
        Field::new("targetWWNs", 1, Type::List(&Type::String)),
        Field::pointer("lun", 2, Type::Int32),
        Field::new("fsType", 3, Type::String),
        Field::new("readOnly", 4, Type::Bool),
        Field::new("wwids", 5, Type::List(&Type::String)),
    ],
};

static AZURE_FILE_VOLUME_SOURCE: Struct = Struct {
    name: "AzureFileVolumeSource",
    fields: &[
        Field::pointer("secretName", 1, Type::String),
        Field::pointer("shareName", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Struct = Struct {
    name: "ConfigMapVolumeSource",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::new("items", 2, Type::List(&Type::Struct(&KEY_TO_PATH))),
        Field::pointer("defaultMode", 3, Type::Int32),
        Field::pointer("optional", 4, Type::Bool),
    ],
};

static VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Struct = Struct {
    name: "VsphereVirtualDiskVolumeSource",
    fields: &[
        Field::pointer("volumePath", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("storagePolicyName", 3, Type::String),
        Field::new("storagePolicyID", 4, Type::String),
    ],
};

static QUOBYTE_VOLUME_SOURCE: Struct = Struct {
    name: "QuobyteVolumeSource",
    fields: &[
        Field::pointer("registry", 1, Type::String),
        Field::pointer("volume", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
        Field::new("user", 4, Type::String),
        Field::new("group", 5, Type::String),
        Field::new("tenant", 6, Type::String),
    ],
};

static AZURE_DISK_VOLUME_SOURCE: Struct = Struct {
    name: "AzureDiskVolumeSource",
    fields: &[
        Field::pointer("diskName", 1, Type::String),
        Field::pointer("diskURI", 2, Type::String),
        Field::pointer("cachingMode", 3, Type::String),
        Field::pointer("fsType", 4, Type::String),
        Field::pointer("readOnly", 5, Type::Bool),
        Field::pointer("kind", 6, Type::String),
    ],
};

static PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Struct = Struct {
    name: "PhotonPersistentDiskVolumeSource",
    fields: &[
        Field::pointer("pdID", 1, Type::String),
        Field::new("fsType", 2, Type::String),
    ],
};

static PROJECTED_VOLUME_SOURCE: Struct = Struct {
    name: "ProjectedVolumeSource",
    fields: &[
        Field::new("sources", 1, Type::List(&Type::Struct(&VOLUME_PROJECTION))),
        Field::pointer("defaultMode", 2, Type::Int32),
    ],
};

static PORTWORX_VOLUME_SOURCE: Struct = Struct {
    name: "PortworxVolumeSource",
    fields: &[
        Field::pointer("volumeID", 1, Type::String),
        Field::new("fsType", 2, Type::String),
        Field::new("readOnly", 3, Type::Bool),
    ],
};

static SCALE_IO_VOLUME_SOURCE: Struct = Struct {
    name: "ScaleIOVolumeSource",
    fields: &[
        Field::pointer("gateway", 1, Type::String),
        Field::pointer("system", 2, Type::String),
        Field::new("secretRef", 3, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        Field::new("sslEnabled", 4, Type::Bool),
        Field::new("protectionDomain", 5, Type::String),
        Field::new("storagePool", 6, Type::String),
        Field::new("storageMode", 7, Type::String),
        Field::new("volumeName", 8, Type::String),
        Field::new("fsType", 9, Type::String),
        Field::new("readOnly", 10, Type::Bool),
    ],
};

static STORAGE_OS_VOLUME_SOURCE: Struct = Struct {
    name: "StorageOSVolumeSource",
    fields: &[
        Field::new("volumeName", 1, Type::String),
        Field::new("volumeNamespace", 2, Type::String),
        Field::new("fsType", 3, Type::String),
        Field::new("readOnly", 4, Type::Bool),
        Field::new("secretRef", 5, Type::Struct(&LOCAL_OBJECT_REFERENCE)),
    ],
};

static CSI_VOLUME_SOURCE: Struct = Struct {
    name: "CSIVolumeSource",
    fields: &[
        Field::pointer("driver", 1, Type::String),
        Field::pointer("readOnly", 2, Type::Bool),
        Field::pointer("fsType", 3, Type::String),
        Field::new("volumeAttributes", 4, Type::Map(&Type::String)),
        Field::new(
            "nodePublishSecretRef",
            5,
            Type::Struct(&LOCAL_OBJECT_REFERENCE),
        ),
    ],
};

static EPHEMERAL_VOLUME_SOURCE: Struct = Struct {
    name: "EphemeralVolumeSource",
    fields: &[Field::new(
        "volumeClaimTemplate",
        1,
        Type::Struct(&PERSISTENT_VOLUME_CLAIM_TEMPLATE),
    )],
};

static IMAGE_VOLUME_SOURCE: Struct = Struct {
    name: "ImageVolumeSource",
    fields: &[
        Field::new("reference", 1, Type::String),
        Field::new("pullPolicy", 2, Type::String),
    ],
};

static CONFIG_MAP_ENV_SOURCE: Struct = Struct {
    name: "ConfigMapEnvSource",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::pointer("optional", 2, Type::Bool),
    ],
};

static SECRET_ENV_SOURCE: Struct = Struct {
    name: "SecretEnvSource",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::pointer("optional", 2, Type::Bool),
    ],
};

static ENV_VAR_SOURCE: Struct = Struct {
    name: "EnvVarSource",
    fields: &[
        Field::new("fieldRef", 1, Type::Struct(&OBJECT_FIELD_SELECTOR)),
        Field::new(
            "resourceFieldRef",
            2,
            Type::Struct(&RESOURCE_FIELD_SELECTOR),
        ),
        Field::new("configMapKeyRef", 3, Type::Struct(&CONFIG_MAP_KEY_SELECTOR)),
        Field::new("secretKeyRef", 4, Type::Struct(&SECRET_KEY_SELECTOR)),
    ],
};

static PROBE_HANDLER: Struct = Struct {
    name: "ProbeHandler",
    fields: &[
        Field::new("exec", 1, Type::Struct(&EXEC_ACTION)),
        Field::new("httpGet", 2, Type::Struct(&HTTP_GET_ACTION)),
        Field::new("tcpSocket", 3, Type::Struct(&TCP_SOCKET_ACTION)),
        Field::new("grpc", 4, Type::Struct(&GRPC_ACTION)),
    ],
};

static LIFECYCLE_HANDLER: Struct = Struct {
    name: "LifecycleHandler",
    fields: &[
        Field::new("exec", 1, Type::Struct(&EXEC_ACTION)),
        Field::new("httpGet", 2, Type::Struct(&HTTP_GET_ACTION)),
        Field::new("tcpSocket", 3, Type::Struct(&TCP_SOCKET_ACTION)),
        Field::new("sleep", 4, Type::Struct(&SLEEP_ACTION)),
    ],
};

static CAPABILITIES: Struct = Struct {
    name: "Capabilities",
    fields: &[
        Field::new("add", 1, Type::List(&Type::String)),
        Field::new("drop", 2, Type::List(&Type::String)),
    ],
};

static NODE_SELECTOR: Struct = Struct {
    name: "NodeSelector",
    fields: &[Field::new(
        "nodeSelectorTerms",
        1,
        Type::List(&Type::Struct(&NODE_SELECTOR_TERM)),
    )],
};

static PREFERRED_SCHEDULING_TERM: Struct = Struct {
    name: "PreferredSchedulingTerm",
    fields: &[
        Field::pointer("weight", 1, Type::Int32),
        Field::new("preference", 2, Type::Struct(&NODE_SELECTOR_TERM)),
    ],
};

static POD_AFFINITY_TERM: Struct = Struct {
    name: "PodAffinityTerm",
    fields: &[
        Field::new("labelSelector", 1, Type::Struct(&LABEL_SELECTOR)),
        Field::new("namespaces", 2, Type::List(&Type::String)),
        Field::pointer("topologyKey", 3, Type::String),
        Field::new("namespaceSelector", 4, Type::Struct(&LABEL_SELECTOR)),
        Field::new("matchLabelKeys", 5, Type::List(&Type::String)),
        Field::new("mismatchLabelKeys", 6, Type::List(&Type::String)),
    ],
};

static WEIGHTED_POD_AFFINITY_TERM: Struct = Struct {
    name: "WeightedPodAffinityTerm",
    fields: &[
        Field::pointer("weight", 1, Type::Int32),
        Field::new("podAffinityTerm", 2, Type::Struct(&POD_AFFINITY_TERM)),
    ],
};

static CONTAINER_STATE_WAITING: Struct = Struct {
    name: "ContainerStateWaiting",
    fields: &[
        Field::new("reason", 1, Type::String),
        Field::new("message", 2, Type::String),
    ],
};

static CONTAINER_STATE_RUNNING: Struct = Struct {
    name: "ContainerStateRunning",
    fields: &[Field::new("startedAt", 1, Type::Time)],
};

static CONTAINER_STATE_TERMINATED: Struct = Struct {
    name: "ContainerStateTerminated",
    fields: &[
        Field::pointer("exitCode", 1, Type::Int32),
        Field::new("signal", 2, Type::Int32),
        Field::new("reason", 3, Type::String),
        Field::new("message", 4, Type::String),
        Field::new("startedAt", 5, Type::Time),
        Field::new("finishedAt", 6, Type::Time),
        Field::new("containerID", 7, Type::String),
    ],
};

static LINUX_CONTAINER_USER: Struct = Struct {
    name: "LinuxContainerUser",
    fields: &[
        Field::pointer("uid", 1, Type::Int64),
        Field::pointer("gid", 2, Type::Int64),
        Field::new("supplementalGroups", 3, Type::List(&Type::Int64)),
    ],
};

static RESOURCE_HEALTH: Struct = Struct {
    name: "ResourceHealth",
    fields: &[
        Field::pointer("resourceID", 1, Type::String),
        Field::new("health", 2, Type::String),
    ],
};

static PORT_STATUS: Struct = Struct {
    name: "PortStatus",
    fields: &[
        Field::pointer("port", 1, Type::Int32),
        Field::pointer("protocol", 2, Type::String),
        Field::pointer("error", 3, Type::String),
    ],
};

static KEY_TO_PATH: Struct = Struct {
    name: "KeyToPath",
    fields: &[
        Field::pointer("key", 1, Type::String),
        Field::pointer("path", 2, Type::String),
        Field::pointer("mode", 3, Type::Int32),
    ],
};

static DOWNWARD_API_VOLUME_FILE: Struct = Struct {
    name: "DownwardAPIVolumeFile",
    fields: &[
        Field::pointer("path", 1, Type::String),
        Field::new("fieldRef", 2, Type::Struct(&OBJECT_FIELD_SELECTOR)),
        Field::new(
            "resourceFieldRef",
            3,
            Type::Struct(&RESOURCE_FIELD_SELECTOR),
        ),
        Field::pointer("mode", 4, Type::Int32),
    ],
};

static VOLUME_PROJECTION: Struct = Struct {
    name: "VolumeProjection",
    fields: &[
        Field::new("secret", 1, Type::Struct(&SECRET_PROJECTION)),
        Field::new("downwardAPI", 2, Type::Struct(&DOWNWARD_API_PROJECTION)),
        Field::new("configMap", 3, Type::Struct(&CONFIG_MAP_PROJECTION)),
        Field::new(
            "serviceAccountToken",
            4,
            Type::Struct(&SERVICE_ACCOUNT_TOKEN_PROJECTION),
        ),
        Field::new(
            "clusterTrustBundle",
            5,
            Type::Struct(&CLUSTER_TRUST_BUNDLE_PROJECTION),
        ),
    ],
};

static PERSISTENT_VOLUME_CLAIM_TEMPLATE: Struct = Struct {
    name: "PersistentVolumeClaimTemplate",
    fields: &[
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&PERSISTENT_VOLUME_CLAIM_SPEC)),
    ],
};

static OBJECT_FIELD_SELECTOR: Struct = Struct {
    name: "ObjectFieldSelector",
    fields: &[
        Field::new("apiVersion", 1, Type::String),
        Field::pointer("fieldPath", 2, Type::String),
    ],
};

static RESOURCE_FIELD_SELECTOR: Struct = Struct {
    name: "ResourceFieldSelector",
    fields: &[
        Field::new("containerName", 1, Type::String),
        Field::pointer("resource", 2, Type::String),
        Field::new("divisor", 3, Type::Quantity),
    ],
};

static CONFIG_MAP_KEY_SELECTOR: Struct = Struct {
    name: "ConfigMapKeySelector",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::pointer("key", 2, Type::String),
        Field::pointer("optional", 3, Type::Bool),
    ],
};

static SECRET_KEY_SELECTOR: Struct = Struct {
    name: "SecretKeySelector",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::pointer("key", 2, Type::String),
        Field::pointer("optional", 3, Type::Bool),
    ],
};

static EXEC_ACTION: Struct = Struct {
    name: "ExecAction",
    fields: &[Field::new("command", 1, Type::List(&Type::String))],
};

static HTTP_GET_ACTION: Struct = Struct {
    name: "HTTPGetAction",
    fields: &[
        Field::new("path", 1, Type::String),
        Field::new("port", 2, Type::IntOrString),
        Field::new("host", 3, Type::String),
        Field::new("scheme", 4, Type::String),
        Field::new("httpHeaders", 5, Type::List(&Type::Struct(&HTTP_HEADER))),
    ],
};

static TCP_SOCKET_ACTION: Struct = Struct {
    name: "TCPSocketAction",
    fields: &[
        Field::new("port", 1, Type::IntOrString),
        Field::new("host", 2, Type::String),
    ],
};

static GRPC_ACTION: Struct = Struct {
    name: "GRPCAction",
    fields: &[
        Field::pointer("port", 1, Type::Int32),
        Field::pointer("service", 2, Type::String),
    ],
};

static SLEEP_ACTION: Struct = Struct {
    name: "SleepAction",
    fields: &[Field::pointer("seconds", 1, Type::Int64)],
};

static NODE_SELECTOR_TERM: Struct = Struct {
    name: "NodeSelectorTerm",
    fields: &[
        Field::new(
            "matchExpressions",
            1,
            Type::List(&Type::Struct(&NODE_SELECTOR_REQUIREMENT)),
        ),
        Field::new(
            "matchFields",
            2,
            Type::List(&Type::Struct(&NODE_SELECTOR_REQUIREMENT)),
        ),
    ],
};

static SECRET_PROJECTION: Struct = Struct {
    name: "SecretProjection",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::new("items", 2, Type::List(&Type::Struct(&KEY_TO_PATH))),
        Field::pointer("optional", 4, Type::Bool),
    ],
};

static DOWNWARD_API_PROJECTION: Struct = Struct {
    name: "DownwardAPIProjection",
    fields: &[Field::new(
        "items",
        1,
        Type::List(&Type::Struct(&DOWNWARD_API_VOLUME_FILE)),
    )],
};

static CONFIG_MAP_PROJECTION: Struct = Struct {
    name: "ConfigMapProjection",
    fields: &[
        Field::inline(1, &LOCAL_OBJECT_REFERENCE),
        Field::new("items", 2, Type::List(&Type::Struct(&KEY_TO_PATH))),
        Field::pointer("optional", 4, Type::Bool),
    ],
};

static SERVICE_ACCOUNT_TOKEN_PROJECTION: Struct = Struct {
    name: "ServiceAccountTokenProjection",
    fields: &[
        Field::new("audience", 1, Type::String),
        Field::pointer("expirationSeconds", 2, Type::Int64),
        Field::pointer("path", 3, Type::String),
    ],
};

static CLUSTER_TRUST_BUNDLE_PROJECTION: Struct = Struct {
    name: "ClusterTrustBundleProjection",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("signerName", 2, Type::String),
        Field::new("labelSelector", 3, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("optional", 5, Type::Bool),
        Field::pointer("path", 4, Type::String),
    ],
};

static PERSISTENT_VOLUME_CLAIM_SPEC: Struct = Struct {
    name: "PersistentVolumeClaimSpec",
    fields: &[
        Field::new("accessModes", 1, Type::List(&Type::String)),
        Field::new("selector", 4, Type::Struct(&LABEL_SELECTOR)),
        Field::new("resources", 2, Type::Struct(&VOLUME_RESOURCE_REQUIREMENTS)),
        Field::new("volumeName", 3, Type::String),
        Field::pointer("storageClassName", 5, Type::String),
        Field::pointer("volumeMode", 6, Type::String),
        Field::new("dataSource", 7, Type::Struct(&TYPED_LOCAL_OBJECT_REFERENCE)),
        Field::new("dataSourceRef", 8, Type::Struct(&TYPED_OBJECT_REFERENCE)),
        Field::pointer("volumeAttributesClassName", 9, Type::String),
    ],
};

static HTTP_HEADER: Struct = Struct {
    name: "HTTPHeader",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("value", 2, Type::String),
    ],
};

static NODE_SELECTOR_REQUIREMENT: Struct = Struct {
    name: "NodeSelectorRequirement",
    fields: &[
        Field::pointer("key", 1, Type::String),
        Field::pointer("operator", 2, Type::String),
        Field::new("values", 3, Type::List(&Type::String)),
    ],
};

static VOLUME_RESOURCE_REQUIREMENTS: Struct = Struct {
    name: "VolumeResourceRequirements",
    fields: &[
        Field::new("limits", 1, Type::Map(&Type::Quantity)),
        Field::new("requests", 2, Type::Map(&Type::Quantity)),
    ],
};

static TYPED_LOCAL_OBJECT_REFERENCE: Struct = Struct {
    name: "TypedLocalObjectReference",
    fields: &[
        Field::pointer("apiGroup", 1, Type::String),
        Field::pointer("kind", 2, Type::String),
        Field::pointer("name", 3, Type::String),
    ],
};

static TYPED_OBJECT_REFERENCE: Struct = Struct {
    name: "TypedObjectReference",
    fields: &[
        Field::pointer("apiGroup", 1, Type::String),
        Field::pointer("kind", 2, Type::String),
        Field::pointer("name", 3, Type::String),
        Field::pointer("namespace", 4, Type::String),
    ],
};
