"""Kafka's topic name rule (Topic.validate) and its '.'/'_' collision check."""

from __future__ import annotations

import pytest

from broker_py.common.topic import (
    check_collision,
    colliding_topics,
    validate_topic_name,
)
from logstore.protocol.errors import InvalidTopicError


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "__consumer_offsets", "..."])
def test_legal_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("x" * 250, "can't be longer than 249 characters"),
        ("evil\n", "other than ASCII alphanumerics"),
        ("a b", "other than ASCII alphanumerics"),
        ("é", "other than ASCII alphanumerics"),
        ("a/b", "other than ASCII alphanumerics"),
    ],
)
def test_illegal_names_name_the_rule(name, message):
    with pytest.raises(InvalidTopicError, match=message):
        validate_topic_name(name)


def test_collisions_between_dot_and_underscore():
    assert colliding_topics("a.b", ["a_b", "a-b", "a.b", "x"]) == ["a_b"]
    assert colliding_topics("ab", ["ab"]) == []
    with pytest.raises(
        InvalidTopicError, match="Topic 'a_b.c' collides with existing topics: a.b.c, a_b_c"
    ):
        check_collision("a_b.c", ["a_b_c", "a.b.c", "other"])
    check_collision("a_b", ["a_b"])  # the same name is TOPIC_ALREADY_EXISTS, decided elsewhere
