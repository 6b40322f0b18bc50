"""security.authorizer: Kafka's StandardAuthorizer rules, one at a time, for every resource
type, and the audit log it writes."""

from __future__ import annotations

import itertools
import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.acls import (
    SUPPORTED_OPERATIONS,
    AclEntry,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    acl_error,
)
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.config_def import ConfigError
from odradek.security.authorizer import (
    StandardAuthorizer,
    authorizer_from_config,
    operations_bitfield,
    supported_operations_bitfield,
)
from odradek.security.principal import KafkaPrincipal, Session

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, PermissionType
ALICE = Session(KafkaPrincipal("User", "alice"), client_address="10.0.0.1")
BOB = Session(KafkaPrincipal("User", "bob"), client_address="10.0.0.2")
TYPES = [RT.TOPIC, RT.GROUP, RT.CLUSTER, RT.TRANSACTIONAL_ID, RT.DELEGATION_TOKEN]
# a name each type may carry (the cluster's is fixed)
NAME = {RT.TOPIC: "orders", RT.GROUP: "orders", RT.CLUSTER: "kafka-cluster",
        RT.TRANSACTIONAL_ID: "orders", RT.DELEGATION_TOKEN: "orders"}


def acl(rt: RT, name: str, op: Op, perm: Perm = Perm.ALLOW, principal: str = "User:alice",
        host: str = "*", pattern: PT = PT.LITERAL) -> AclEntry:
    return AclEntry(rt, name, pattern, principal, host, op, perm)


def authz(*acls: AclEntry, super_users: tuple[str, ...] = (),
          allow_if_none: bool = False) -> StandardAuthorizer:
    table = {uuid.uuid4(): a for a in acls}
    return StandardAuthorizer(lambda: table, super_users, allow_if_none)


@pytest.mark.parametrize("rt", TYPES)
def test_every_type_no_acl_allow_deny(rt: RT) -> None:
    name = NAME[rt]
    op = sorted(SUPPORTED_OPERATIONS[rt])[0]
    assert not authz().authorize(ALICE, op, rt, name)
    assert authz(allow_if_none=True).authorize(ALICE, op, rt, name)
    allowed = authz(acl(rt, name, op))
    assert allowed.authorize(ALICE, op, rt, name)
    assert not allowed.authorize(BOB, op, rt, name)  # ACLs exist: bob is denied, not defaulted
    assert not authz(acl(rt, name, op), allow_if_none=True).authorize(BOB, op, rt, name)
    both = authz(acl(rt, name, op), acl(rt, name, op, Perm.DENY))
    assert not both.authorize(ALICE, op, rt, name)


@pytest.mark.parametrize("rt", [RT.TOPIC, RT.GROUP, RT.TRANSACTIONAL_ID, RT.DELEGATION_TOKEN])
def test_wildcard_and_prefixed_on_every_named_type(rt: RT) -> None:
    op = Op.DESCRIBE
    wild = authz(acl(rt, "*", op))
    assert wild.authorize(ALICE, op, rt, "anything")
    prefixed = authz(acl(rt, "ord", op, pattern=PT.PREFIXED))
    assert prefixed.authorize(ALICE, op, rt, "orders")
    assert prefixed.authorize(ALICE, op, rt, "ord")
    assert not prefixed.authorize(ALICE, op, rt, "or")
    assert not prefixed.authorize(ALICE, op, rt, "payments")
    # a LITERAL ACL whose name is a prefix of the resource does not apply to it
    literal = authz(acl(rt, "ord", op))
    assert not literal.authorize(ALICE, op, rt, "orders")
    # a literal "*" only matches as the wildcard; a PREFIXED "*" is a prefix like any other
    star_prefix = authz(acl(rt, "*", op, pattern=PT.PREFIXED))
    assert not star_prefix.authorize(ALICE, op, rt, "orders")
    assert star_prefix.authorize(ALICE, op, rt, "*x")


def test_deny_beats_allow_across_patterns() -> None:
    rt = RT.TOPIC
    a = authz(acl(rt, "*", Op.WRITE), acl(rt, "orders", Op.WRITE, Perm.DENY))
    assert not a.authorize(ALICE, Op.WRITE, rt, "orders")
    assert a.authorize(ALICE, Op.WRITE, rt, "payments")
    a = authz(acl(rt, "orders", Op.WRITE), acl(rt, "or", Op.ALL, Perm.DENY, pattern=PT.PREFIXED))
    assert not a.authorize(ALICE, Op.WRITE, rt, "orders")
    a = authz(acl(rt, "orders", Op.WRITE), acl(rt, "*", Op.WRITE, Perm.DENY, "User:*"))
    assert not a.authorize(ALICE, Op.WRITE, rt, "orders")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_operations_that_imply_describe(granted: Op) -> None:
    a = authz(acl(RT.TOPIC, "t", granted))
    assert a.authorize(ALICE, Op.DESCRIBE, RT.TOPIC, "t")
    assert not a.authorize(ALICE, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
def test_operations_that_do_not_imply_describe(granted: Op) -> None:
    assert not authz(acl(RT.TOPIC, "t", granted)).authorize(ALICE, Op.DESCRIBE, RT.TOPIC, "t")


def test_alter_configs_implies_describe_configs_and_nothing_else() -> None:
    a = authz(acl(RT.TOPIC, "t", Op.ALTER_CONFIGS))
    assert a.authorize(ALICE, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    for op in (Op.READ, Op.WRITE, Op.ALTER, Op.DELETE, Op.CREATE):
        assert not a.authorize(ALICE, op, RT.TOPIC, "t")
    # no chain: WRITE implies DESCRIBE, never DESCRIBE_CONFIGS or READ
    w = authz(acl(RT.TOPIC, "t", Op.WRITE))
    assert not w.authorize(ALICE, Op.READ, RT.TOPIC, "t")


def test_deny_implies_nothing() -> None:
    # a DENY of READ does not deny DESCRIBE (Kafka: implications are for ALLOW only)
    a = authz(acl(RT.TOPIC, "t", Op.DESCRIBE), acl(RT.TOPIC, "t", Op.READ, Perm.DENY))
    assert a.authorize(ALICE, Op.DESCRIBE, RT.TOPIC, "t")
    assert not a.authorize(ALICE, Op.READ, RT.TOPIC, "t")
    b = authz(acl(RT.TOPIC, "t", Op.ALL), acl(RT.TOPIC, "t", Op.ALTER_CONFIGS, Perm.DENY))
    assert b.authorize(ALICE, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")


def test_all_matches_every_operation_both_ways() -> None:
    every = [op for op in Op if op not in (Op.ANY, Op.UNKNOWN, Op.ALL)]
    a = authz(acl(RT.TOPIC, "t", Op.ALL))
    assert all(a.authorize(ALICE, op, RT.TOPIC, "t") for op in every)
    d = authz(acl(RT.TOPIC, "t", Op.ALL), acl(RT.TOPIC, "t", Op.ALL, Perm.DENY))
    assert not any(d.authorize(ALICE, op, RT.TOPIC, "t") for op in every)


def test_principal_matching() -> None:
    a = authz(acl(RT.GROUP, "g", Op.READ, principal="User:*"))
    assert a.authorize(ALICE, Op.READ, RT.GROUP, "g") and a.authorize(BOB, Op.READ, RT.GROUP, "g")
    # the wildcard principal is User:* only; another type's principal is compared whole
    other = Session(KafkaPrincipal("Group", "alice"), client_address="10.0.0.1")
    assert not authz(acl(RT.GROUP, "g", Op.READ)).authorize(other, Op.READ, RT.GROUP, "g")


def test_host_matching() -> None:
    a = authz(acl(RT.TOPIC, "t", Op.READ, host="10.0.0.1"))
    assert a.authorize(ALICE, Op.READ, RT.TOPIC, "t")
    elsewhere = Session(ALICE.principal, client_address="10.0.0.9")
    assert not a.authorize(elsewhere, Op.READ, RT.TOPIC, "t")
    d = authz(acl(RT.TOPIC, "t", Op.READ), acl(RT.TOPIC, "t", Op.READ, Perm.DENY,
                                               host="10.0.0.9"))
    assert a.authorize(ALICE, Op.READ, RT.TOPIC, "t") and d.authorize(ALICE, Op.READ, RT.TOPIC, "t")
    assert not d.authorize(elsewhere, Op.READ, RT.TOPIC, "t")


def test_super_users_bypass_deny() -> None:
    a = authz(acl(RT.TOPIC, "t", Op.ALL, Perm.DENY, "User:*"), super_users=("User:alice",))
    assert a.authorize(ALICE, Op.DELETE, RT.TOPIC, "t")
    assert not a.authorize(BOB, Op.DELETE, RT.TOPIC, "t")


def test_allow_everyone_if_no_acl_found_is_per_resource() -> None:
    a = authz(acl(RT.TOPIC, "t", Op.READ, principal="User:bob"), allow_if_none=True)
    assert a.authorize(ALICE, Op.READ, RT.TOPIC, "other")  # no ACL on it
    assert not a.authorize(ALICE, Op.READ, RT.TOPIC, "t")  # ACLs on it, none for alice
    # an ACL for another operation still counts as an ACL on the resource
    b = authz(acl(RT.TOPIC, "t", Op.WRITE), allow_if_none=True)
    assert not b.authorize(ALICE, Op.DELETE, RT.TOPIC, "t")


def test_acls_follow_the_source() -> None:
    table: dict[uuid.UUID, AclEntry] = {}
    a = StandardAuthorizer(lambda: table)
    assert not a.authorize(ALICE, Op.READ, RT.TOPIC, "t")
    table = {uuid.uuid4(): acl(RT.TOPIC, "t", Op.READ)}  # a new image: a new map
    assert a.authorize(ALICE, Op.READ, RT.TOPIC, "t")


def test_authorize_by_resource_type() -> None:
    rt = RT.TOPIC
    assert not authz().authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert authz(allow_if_none=True).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert authz(acl(rt, "x", Op.WRITE)).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert not authz(acl(rt, "x", Op.READ)).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert not authz(acl(rt, "x", Op.WRITE), acl(rt, "x", Op.WRITE, Perm.DENY)
                     ).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert not authz(acl(rt, "xy", Op.WRITE), acl(rt, "x", Op.WRITE, Perm.DENY,
                                                   pattern=PT.PREFIXED)
                     ).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert authz(acl(rt, "xy", Op.WRITE), acl(rt, "xyz", Op.WRITE, Perm.DENY,
                                               pattern=PT.PREFIXED)
                 ).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert not authz(acl(rt, "x", Op.WRITE), acl(rt, "*", Op.ALL, Perm.DENY)
                     ).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert authz(acl(rt, "*", Op.WRITE)).authorize_by_resource_type(ALICE, Op.WRITE, rt)
    assert authz(super_users=("User:alice",)).authorize_by_resource_type(ALICE, Op.WRITE, rt)


def test_authorized_operations_bitfield() -> None:
    a = authz(acl(RT.TOPIC, "t", Op.WRITE))
    assert a.authorized_operations(ALICE, RT.TOPIC, "t") == operations_bitfield(
        [Op.WRITE, Op.DESCRIBE])
    full = supported_operations_bitfield(RT.CLUSTER)
    assert full == sum(1 << int(op) for op in SUPPORTED_OPERATIONS[RT.CLUSTER])
    su = authz(super_users=("User:alice",))
    assert su.authorized_operations(ALICE, RT.CLUSTER, "kafka-cluster") == full


def test_audit_log(caplog: pytest.LogCaptureFixture) -> None:
    a = authz(acl(RT.TOPIC, "t", Op.WRITE))
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        a.authorize(BOB, Op.WRITE, RT.TOPIC, "t", api="Produce")
        a.authorize(ALICE, Op.WRITE, RT.TOPIC, "t", api="Produce")
        a.authorized_operations(BOB, RT.TOPIC, "t")  # trace only
    records = [r for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert [r.levelno for r in records] == [logging.INFO, logging.DEBUG]
    assert records[0].getMessage().startswith(
        "Principal = User:bob is Denied operation = WRITE from host = 10.0.0.2 on resource = "
        "Topic:LITERAL:t for request = Produce")
    assert "Allowed" in records[1].getMessage() and "MatchingAcl" in records[1].getMessage()


def test_config() -> None:
    acls: dict[uuid.UUID, AclEntry] = {}
    assert authorizer_from_config(BrokerConfig({}), lambda: acls) is None
    a = authorizer_from_config(BrokerConfig({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin; User:ops", "allow.everyone.if.no.acl.found": "true"}),
        lambda: acls)
    assert a is not None and a.super_users == {"User:admin", "User:ops"} and a.allow_if_no_acl
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        authorizer_from_config(BrokerConfig(
            {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}), lambda: acls)
    assert BrokerConfig({}).get("allow.everyone.if.no.acl.found") is False


def test_acl_validation() -> None:
    assert acl_error(acl(RT.TOPIC, "t", Op.READ)) is None
    assert "only supports" in (acl_error(acl(RT.GROUP, "g", Op.WRITE)) or "")
    assert acl_error(acl(RT.CLUSTER, "other", Op.ALTER)) is not None
    assert acl_error(acl(RT.TOPIC, "t", Op.ANY)) is not None
    assert acl_error(acl(RT.TOPIC, "t", Op.READ, principal="alice")) is not None
    assert acl_error(AclEntry(RT.TOPIC, "t", PT.MATCH, "User:a", "*", Op.READ,
                              Perm.ALLOW)) is not None
    assert acl_error(acl(RT.TOPIC, "", Op.READ)) is not None


def test_filters() -> None:
    lit, wild = acl(RT.TOPIC, "orders", Op.READ), acl(RT.TOPIC, "*", Op.READ)
    pre, other = acl(RT.TOPIC, "ord", Op.READ, pattern=PT.PREFIXED), acl(RT.GROUP, "g", Op.READ)
    every = [lit, wild, pre, other]
    assert [a for a in every if AclFilter().matches(a)] == every
    match = AclFilter(RT.TOPIC, "orders", PT.MATCH)
    assert [a for a in every if match.matches(a)] == [lit, wild, pre]
    exact = AclFilter(RT.TOPIC, "orders", PT.LITERAL)
    assert [a for a in every if exact.matches(a)] == [lit]
    any_name = AclFilter(RT.ANY, "orders", PT.ANY)
    assert [a for a in every if any_name.matches(a)] == [lit]
    assert AclFilter(permission=Perm.DENY).matches(lit) is False
    assert AclFilter(resource_type=RT.UNKNOWN).error() is not None


_names = st.text(alphabet="ab*", min_size=1, max_size=4)


@given(st.lists(st.tuples(_names, st.sampled_from([PT.LITERAL, PT.PREFIXED]),
                          st.sampled_from([Perm.ALLOW, Perm.DENY])), max_size=6), _names)
def test_index_agrees_with_a_plain_scan(rules: list[tuple[str, PT, Perm]], name: str) -> None:
    """The indexed lookup answers as a scan of every ACL with Kafka's rules would."""
    acls = [acl(RT.TOPIC, n, Op.READ, perm, pattern=pt) for n, pt, perm in rules]
    applies = [a for a in acls
               if (a.pattern_type is PT.LITERAL and a.resource_name in (name, "*"))
               or (a.pattern_type is PT.PREFIXED and name.startswith(a.resource_name))]
    expected = (bool(applies) and not any(a.permission is Perm.DENY for a in applies))
    assert authz(*acls).authorize(ALICE, Op.READ, RT.TOPIC, name) == expected


def test_every_supported_operation_can_be_granted_alone() -> None:
    for rt, op in itertools.chain.from_iterable(
            ((rt, op) for op in SUPPORTED_OPERATIONS[rt]) for rt in TYPES):
        a = authz(acl(rt, NAME[rt], op))
        assert a.authorize(ALICE, op, rt, NAME[rt]), (rt, op)
        assert not a.authorize(BOB, op, rt, NAME[rt]), (rt, op)
