//! iproute2's `ip`, as data: its options, objects and commands in the order iproute2
//! tries them. iproute2 matches any prefix (`matches()`), and the first entry a word is a
//! prefix of wins, so `ip l s` is `ip link set` and `ip a a` is `ip addr add`; entries
//! marked exact are compared whole (`strcmp()`).

/// What a command does.
#[derive(Debug, Clone, Copy)]
pub(super) enum What {
    /// Prints state.
    Shows,
    /// Changes network configuration.
    Changes,
    /// `netns exec NAME CMD…`, `vrf exec NAME CMD…`: runs a command.
    Runs,
    /// A further level of commands, with what no command means.
    Nested(&'static [Verb], &'static What),
}

/// One command word.
#[derive(Debug, Clone, Copy)]
pub(super) struct Verb {
    pub name: &'static str,
    /// Compared whole, not as a prefix.
    pub exact: bool,
    pub what: What,
}

const fn show(name: &'static str) -> Verb {
    Verb {
        name,
        exact: false,
        what: What::Shows,
    }
}
const fn change(name: &'static str) -> Verb {
    Verb {
        name,
        exact: false,
        what: What::Changes,
    }
}
const fn exact(mut v: Verb) -> Verb {
    v.exact = true;
    v
}
const fn nested(name: &'static str, verbs: &'static [Verb], none: &'static What) -> Verb {
    Verb {
        name,
        exact: false,
        what: What::Nested(verbs, none),
    }
}

/// Global options, in iproute2's order: (name, takes a value, runs commands from a file).
pub(super) const IP_OPTIONS: &[(&str, bool, bool)] = &[
    ("-loops", true, false),
    ("-family", true, false),
    ("-human", false, false),
    ("-human-readable", false, false),
    ("-iec", false, false),
    ("-stats", false, false),
    ("-statistics", false, false),
    ("-details", false, false),
    ("-resolve", false, false),
    ("-oneline", false, false),
    ("-timestamp", false, false),
    ("-tshort", false, false),
    ("-Version", false, false),
    ("-force", false, false),
    ("-batch", true, true),
    ("-brief", false, false),
    ("-json", false, false),
    ("-pretty", false, false),
    ("-rcvbuf", true, false),
    ("-color", false, false),
    ("-help", false, false),
    ("-netns", true, false),
    ("-Numeric", false, false),
    ("-all", false, false),
];

/// Options compared whole.
pub(super) const IP_EXACT_OPTIONS: &[&str] = &["-4", "-6", "-0", "-M", "-B", "-echo"];

const SHOWS: What = What::Shows;
const CHANGES: What = What::Changes;

const ADDRESS: &[Verb] = &[
    change("add"),
    change("change"),
    exact(change("chg")),
    change("replace"),
    change("delete"),
    show("list"),
    show("show"),
    show("lst"),
    change("flush"),
    show("save"),
    show("showdump"),
    change("restore"),
    show("help"),
];
const ADDRLABEL: &[Verb] = &[
    show("list"),
    show("lst"),
    show("show"),
    change("add"),
    change("delete"),
    change("flush"),
    show("help"),
];
const MADDRESS: &[Verb] = &[
    change("add"),
    change("delete"),
    show("list"),
    show("show"),
    show("lst"),
    show("help"),
];
const ROUTE: &[Verb] = &[
    change("add"),
    change("change"),
    exact(change("chg")),
    change("replace"),
    change("prepend"),
    change("append"),
    change("test"),
    change("delete"),
    show("list"),
    show("show"),
    show("lst"),
    show("get"),
    change("flush"),
    show("save"),
    change("restore"),
    show("showdump"),
    show("help"),
];
const RULE: &[Verb] = &[
    show("list"),
    show("lst"),
    show("show"),
    show("save"),
    change("restore"),
    change("add"),
    change("delete"),
    change("flush"),
    show("help"),
];
const NEIGH: &[Verb] = &[
    change("add"),
    change("change"),
    exact(change("chg")),
    change("replace"),
    change("delete"),
    show("get"),
    show("show"),
    show("lst"),
    show("list"),
    change("flush"),
    show("help"),
];
const NTABLE: &[Verb] = &[
    change("change"),
    change("chg"),
    show("show"),
    show("lst"),
    show("list"),
    show("help"),
];
const LINK_PROPERTY: &[Verb] = &[change("add"), change("del"), show("help")];
const LINK: &[Verb] = &[
    change("add"),
    change("set"),
    change("change"),
    change("replace"),
    change("delete"),
    show("show"),
    show("lst"),
    show("list"),
    show("xstats"),
    show("afstats"),
    nested("property", LINK_PROPERTY, &CHANGES),
    show("help"),
];
const ADD_DELETE_SHOW: &[Verb] = &[
    change("add"),
    change("delete"),
    show("show"),
    show("lst"),
    show("list"),
    show("help"),
];
const FOU: &[Verb] = &[show("help"), change("add"), change("delete"), show("show")];
const MACSEC: &[Verb] = &[
    show("help"),
    show("show"),
    change("add"),
    change("set"),
    change("delete"),
    change("offload"),
];
const TUNNEL: &[Verb] = &[
    change("add"),
    change("change"),
    change("delete"),
    show("show"),
    show("lst"),
    show("list"),
    change("prl"),
    change("6rd"),
    show("help"),
];
const TOKEN: &[Verb] = &[
    show("list"),
    show("lst"),
    show("show"),
    change("set"),
    change("add"),
    change("delete"),
    show("get"),
    show("help"),
];
const TCP_METRICS: &[Verb] = &[
    show("list"),
    show("lst"),
    show("show"),
    change("delete"),
    change("remove"),
    change("flush"),
    show("help"),
];
const XFRM_STATE: &[Verb] = &[
    change("add"),
    change("update"),
    change("allocspi"),
    change("delete"),
    change("deleteall"),
    change("delall"),
    show("list"),
    show("show"),
    show("lst"),
    show("get"),
    change("flush"),
    show("count"),
    show("help"),
];
const XFRM_POLICY: &[Verb] = &[
    change("add"),
    change("update"),
    change("delete"),
    change("deleteall"),
    change("delall"),
    show("list"),
    show("show"),
    show("lst"),
    show("get"),
    change("flush"),
    show("count"),
    change("set"),
    change("setdefault"),
    show("getdefault"),
    show("help"),
];
const XFRM: &[Verb] = &[
    nested("state", XFRM_STATE, &SHOWS),
    nested("sa", XFRM_STATE, &SHOWS),
    nested("policy", XFRM_POLICY, &SHOWS),
    show("monitor"),
    show("help"),
];
const MROUTE: &[Verb] = &[show("list"), show("show"), show("lst"), show("help")];
const NETNS: &[Verb] = &[
    show("list"),
    show("show"),
    show("lst"),
    show("list-id"),
    show("help"),
    change("add"),
    change("set"),
    change("delete"),
    show("identify"),
    show("pids"),
    Verb {
        name: "exec",
        exact: false,
        what: What::Runs,
    },
    show("monitor"),
    change("attach"),
];
const NETCONF: &[Verb] = &[show("show"), show("lst"), show("list"), show("help")];
const VRF: &[Verb] = &[
    show("identify"),
    show("pids"),
    Verb {
        name: "exec",
        exact: false,
        what: What::Runs,
    },
    show("show"),
    show("lst"),
    show("list"),
    show("help"),
];
const SHOW_SET: &[Verb] = &[show("show"), change("set")];
const SR: &[Verb] = &[
    show("help"),
    nested("hmac", SHOW_SET, &CHANGES),
    nested("tunsrc", SHOW_SET, &CHANGES),
];
const NEXTHOP_BUCKET: &[Verb] = &[
    show("list"),
    show("show"),
    show("lst"),
    show("get"),
    show("help"),
];
const NEXTHOP: &[Verb] = &[
    change("add"),
    change("replace"),
    change("delete"),
    show("list"),
    show("show"),
    show("lst"),
    show("get"),
    change("flush"),
    nested("bucket", NEXTHOP_BUCKET, &SHOWS),
    show("help"),
];
const MPTCP_ENDPOINT: &[Verb] = &[
    change("add"),
    change("change"),
    change("delete"),
    show("show"),
    change("flush"),
];
const MPTCP_LIMITS: &[Verb] = &[change("set"), show("show")];
const MPTCP: &[Verb] = &[
    show("help"),
    nested("endpoint", MPTCP_ENDPOINT, &SHOWS),
    nested("limits", MPTCP_LIMITS, &SHOWS),
    show("monitor"),
];
const IOAM_NAMESPACE: &[Verb] = &[
    exact(show("show")),
    exact(change("add")),
    exact(change("del")),
    exact(change("set")),
];
const IOAM_SCHEMA: &[Verb] = &[
    exact(show("show")),
    exact(change("add")),
    exact(change("del")),
];
const IOAM: &[Verb] = &[
    exact(show("help")),
    Verb {
        name: "namespace",
        exact: true,
        what: What::Nested(IOAM_NAMESPACE, &CHANGES),
    },
    Verb {
        name: "schema",
        exact: true,
        what: What::Nested(IOAM_SCHEMA, &CHANGES),
    },
    exact(show("monitor")),
];
const STATS: &[Verb] = &[
    exact(show("help")),
    exact(show("show")),
    exact(change("set")),
];

/// The objects, in iproute2's order (`ip n` is `neighbor`, `ip l` is `link`).
pub(super) const IP_OBJECTS: &[Verb] = &[
    nested("address", ADDRESS, &SHOWS),
    nested("addrlabel", ADDRLABEL, &SHOWS),
    nested("maddress", MADDRESS, &SHOWS),
    nested("route", ROUTE, &SHOWS),
    nested("rule", RULE, &SHOWS),
    nested("neighbor", NEIGH, &SHOWS),
    nested("neighbour", NEIGH, &SHOWS),
    nested("ntable", NTABLE, &SHOWS),
    nested("ntbl", NTABLE, &SHOWS),
    nested("link", LINK, &SHOWS),
    nested("l2tp", ADD_DELETE_SHOW, &SHOWS),
    nested("fou", FOU, &SHOWS),
    nested("ila", ADD_DELETE_SHOW, &SHOWS),
    nested("macsec", MACSEC, &SHOWS),
    nested("tunnel", TUNNEL, &SHOWS),
    nested("tunl", TUNNEL, &SHOWS),
    nested("tuntap", ADD_DELETE_SHOW, &SHOWS),
    nested("tap", ADD_DELETE_SHOW, &SHOWS),
    nested("token", TOKEN, &SHOWS),
    nested("tcpmetrics", TCP_METRICS, &SHOWS),
    nested("tcp_metrics", TCP_METRICS, &SHOWS),
    show("monitor"),
    nested("xfrm", XFRM, &SHOWS),
    nested("mroute", MROUTE, &SHOWS),
    nested("mrule", RULE, &SHOWS),
    nested("netns", NETNS, &SHOWS),
    nested("netconf", NETCONF, &SHOWS),
    nested("vrf", VRF, &SHOWS),
    nested("sr", SR, &SHOWS),
    nested("nexthop", NEXTHOP, &SHOWS),
    nested("mptcp", MPTCP, &SHOWS),
    nested("ioam", IOAM, &SHOWS),
    show("help"),
    nested("stats", STATS, &SHOWS),
];

/// iproute2's `matches()`: `word` is a non-empty prefix of `name`.
pub(super) fn matches(word: &str, name: &str) -> bool {
    !word.is_empty() && name.starts_with(word)
}
