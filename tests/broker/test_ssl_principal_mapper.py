"""ssl.principal.mapping.rules, with the examples of Kafka's documentation."""

from __future__ import annotations

import pytest

from broker_py.config.kafka_config import ConfigError
from broker_py.security.ssl.ssl_principal_mapper import NoMatchingRuleError, SslPrincipalMapper

RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, "
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
)


@pytest.mark.parametrize(
    "dn,name",
    [
        ("CN=kafka1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "kafka1"),
        ("CN=duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
        ("cn=duke,ou=JavaSoft", "DUKE"),
        ("OU=JavaSoft,O=Sun", "OU=JavaSoft,O=Sun"),
    ],
)
def test_rules_map_in_order(dn, name):
    assert SslPrincipalMapper(RULES).name(dn) == name


def test_escapes_and_a_dn_no_rule_maps():
    mapper = SslPrincipalMapper(r"RULE:^CN=([^\,]*)\,O=(.*)$/$2\/$1/")
    assert mapper.name("CN=app,O=corp") == "corp/app"
    with pytest.raises(NoMatchingRuleError, match="O=corp"):
        mapper.name("O=corp")


@pytest.mark.parametrize("value", ["", "RULE:abc", "BLAH", "RULE:(/x/", "DEFAULT RULE:a/b/"])
def test_bad_rules_name_the_key(value):
    with pytest.raises(ConfigError) as e:
        SslPrincipalMapper(value, "listener.name.mtls.ssl.principal.mapping.rules")
    assert e.value.key == "listener.name.mtls.ssl.principal.mapping.rules"
