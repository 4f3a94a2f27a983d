"""The one executor of a pass's planned writes (executor.carry_out): in order, a refusal raises
and stops the rest unless the caller keeps going, a Chain stops at the first write not made."""

from __future__ import annotations

from typing import Any, Mapping

import pytest
from kubernetes.client.rest import ApiException

from mysql_operator import executor
from mysql_operator import writes as w
from tests.support.fakes import RecordingKube

BODY = {"metadata": {"namespace": "ns", "name": "db", "uid": "u-1"}}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db-config", "namespace": "ns"}}
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}}
SECRET = {"metadata": {"name": "db-tls", "namespace": "ns"}, "data": {"tls.crt": "Y2VydA=="}}


class Refusing(RecordingKube):
    """Refuses to apply the objects it is given the names of (the API server's 422)."""

    def __init__(self, refused: set[str], **kw: Any) -> None:
        super().__init__(**kw)
        self.refused = refused

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] in self.refused:
            self.calls.append(("refused", obj["metadata"]["name"]))
            raise ApiException(status=422, reason="Unprocessable Entity")
        return super().apply(obj)


def test_the_writes_are_made_in_their_order_one_done_each():
    kube = RecordingKube()
    steps = [
        w.SetPodLabel("db-1", "role", None),
        w.Post((("Normal", "Promoted", "db-0"),)),
        w.PatchStatus({"phase": "Running"}),
        w.SetPodLabel("db-0", "role", "primary"),
    ]
    done = executor.carry_out(kube, BODY, steps)
    assert kube.calls == [
        ("label", "db-1", None),
        ("events", ["Promoted"]),
        ("status", {"phase": "Running"}),
        ("label", "db-0", "primary"),
    ]
    assert [d.write for d in done] == steps and all(d.made for d in done)


def test_a_refusal_raises_and_stops_the_rest():
    kube = Refusing({"db-config"})
    with pytest.raises(ApiException):
        executor.carry_out(kube, BODY, [w.Apply(CONFIG), w.Apply(STS)])
    assert kube.calls == [("refused", "db-config")]


def test_kept_going_a_refusal_is_in_its_done_and_stops_only_the_rest_of_its_chain():
    kube = Refusing({"db"})
    chain = w.Chain((w.Apply(STS), w.RemoveAnnotation("approve-restart")))
    done = executor.carry_out(kube, BODY, [chain, w.Apply(CONFIG)], keep_going=True)
    assert kube.calls == [("refused", "db"), ("apply", "ConfigMap", "db-config")]
    assert [(d.made, d.skipped, type(d.error).__name__) for d in done] == [
        (False, False, "ApiException"),
        (False, True, "NoneType"),
        (True, False, "NoneType"),
    ]


def test_a_secret_to_create_that_exists_stops_its_chain_unless_its_keys_may_be_set():
    kube = RecordingKube(secrets={"db-tls": {"tls.crt": "theirs"}})
    then = w.Post((("Normal", "CertificateRenewed", "renewed"),))
    done = executor.carry_out(kube, BODY, [w.Chain((w.SecretWrite(SECRET, create=True), then))])
    assert [d.made for d in done] == [False, False] and done[1].skipped
    assert kube.secrets["db-tls"] == {"tls.crt": "theirs"}  # never overwritten
    kube.calls.clear()
    done = executor.carry_out(kube, BODY, [w.Chain((w.SecretWrite(SECRET, create=True, or_keys=True), then))])
    assert [d.made for d in done] == [True, True]
    assert kube.secrets["db-tls"] == {"tls.crt": "cert"}


def test_a_pod_to_delete_that_is_gone_stops_its_chain_and_a_named_call_is_the_callers():
    kube = RecordingKube(gone=["db-2"])
    called = []
    restart = w.Chain((w.DeletePod("db-2"), w.Post((("Normal", "ReplacedStuckPod", "replacing db-2"),))))
    done = executor.carry_out(kube, BODY, [restart, w.Call("drop")], calls={"drop": lambda: called.append(1)})
    assert kube.calls == [("delete", "db-2")] and called == [1]
    assert [d.made for d in done] == [False, False, True]
