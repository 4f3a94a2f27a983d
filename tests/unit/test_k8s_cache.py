"""The watched stores the reconcile pass reads from: a body is only ever replaced by a newer one
(a late watch event never undoes the operator's own write), deletions stick, a LIST replaces what
it covers, and readers go to the API server until the first LIST."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from mysql_operator.k8s import cache, reflector
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.reflector import Store, newer


def obj(name, version, ns="ns", **labels):
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": str(version), "labels": labels}}


def version(store, name, ns="ns"):
    body = store.get(ns, name)
    return body and body["metadata"]["resourceVersion"]


def test_newer_compares_revisions_as_numbers_and_lets_unknown_formats_win():
    assert newer("10", "9") and newer("10", "10") and not newer("9", "10")
    assert newer("5", None) and newer("5", "") and not newer("", "5")
    assert newer("abc", "12")  # not a number: the newcomer wins


def test_an_older_body_never_replaces_a_newer_one():
    s = Store()
    s.offer(obj("a", 12))  # the operator's own write, answered by the API server
    s.offer(obj("a", 11))  # the watch, late
    assert version(s, "a") == "12"
    s.offer(obj("a", 13))
    assert version(s, "a") == "13"


def test_a_deletion_sticks_against_late_events_and_a_recreation_is_seen():
    s = Store()
    s.offer(obj("a", 5))
    s.remove(obj("a", 7))
    assert s.get("ns", "a") is None
    s.offer(obj("a", 6))  # an event from before the deletion
    assert s.get("ns", "a") is None
    s.offer(obj("a", 9))  # created again
    assert version(s, "a") == "9"


def test_a_deleted_body_is_kept_as_last_seen_after_its_name_is_reused_until_the_next_list():
    """A Pod's DELETED event says how it ended (the kubelet saw its server stop, or it was
    force-deleted while running): kept after a new Pod of the same name appears, dropped by a LIST."""
    s = Store(scopes=("ns",))
    s.offer(obj("db-0", 5))
    s.remove(obj("db-0", 7, phase="Failed"))
    s.offer(obj("db-0", 9))  # its replacement
    assert version(s, "db-0") == "9"
    last = s.last_deleted("ns", "db-0")
    assert last is not None and last["metadata"]["resourceVersion"] == "7"
    s.remove(obj("db-0", 6))  # an older deletion than the body held: ignored, nothing recorded
    assert s.last_deleted("ns", "db-0")["metadata"]["resourceVersion"] == "7"
    assert s.last_deleted("ns", "db-1") is None
    s.replace([obj("db-0", 9)], "20", scope="ns")
    assert s.last_deleted("ns", "db-0") is None


def test_an_old_deletion_does_not_remove_a_newer_body():
    s = Store()
    s.offer(obj("a", 9))
    s.remove(obj("a", 7))
    assert version(s, "a") == "9"


def test_a_list_removes_what_it_lacks_unless_it_is_newer_and_only_in_its_namespace():
    s = Store(scopes=("ns", "other"))
    s.offer(obj("gone", 3))
    s.offer(obj("written-after-the-list", 30))
    s.offer(obj("elsewhere", 4, ns="other"))
    s.replace([obj("kept", 10)], "20", scope="ns")
    assert s.get("ns", "gone") is None
    assert version(s, "written-after-the-list") == "30"
    assert version(s, "elsewhere", ns="other") == "4"
    assert version(s, "kept") == "10"
    assert not s.synced.is_set()  # one namespace listed of two
    s.replace([], "21", scope="other")
    assert s.synced.is_set() and s.get("other", "elsewhere") is None


def test_select_matches_namespace_and_every_label():
    s = Store()
    s.offer(obj("a-0", 1, app="a", role="primary"))
    s.offer(obj("a-1", 1, app="a"))
    s.offer(obj("b-0", 1, app="b"))
    s.offer(obj("a-0", 1, ns="elsewhere", app="a"))
    assert sorted(b["metadata"]["name"] for b in s.select("ns", {"app": "a"})) == ["a-0", "a-1"]
    assert [b["metadata"]["name"] for b in s.select("ns", {"app": "a", "role": "primary"})] == ["a-0"]


def test_select_by_cluster_follows_label_changes_deletions_and_lists():
    """The store groups objects by their cluster's label (INDEX_LABEL): a selection naming it sees
    exactly what a scan of every object would, whatever happened to them since."""
    c = reflector.INDEX_LABEL
    s = Store()

    def names(ns="ns", **labels):
        return sorted(b["metadata"]["name"] for b in s.select(ns, labels))

    s.offer(obj("x-0", 1, **{c: "x", "role": "primary"}))
    s.offer(obj("x-1", 1, **{c: "x"}))
    s.offer(obj("y-0", 1, **{c: "y"}))
    s.offer(obj("x-0", 1, ns="elsewhere", **{c: "x"}))
    assert names(**{c: "x"}) == ["x-0", "x-1"]
    assert names(**{c: "x", "role": "primary"}) == ["x-0"]
    s.offer(obj("x-1", 2, **{c: "y"}))  # relabelled: it moves to the other cluster's group
    assert names(**{c: "x"}) == ["x-0"] and names(**{c: "y"}) == ["x-1", "y-0"]
    s.offer(obj("x-1", 1, **{c: "x"}))  # a late event does not move it back
    assert names(**{c: "y"}) == ["x-1", "y-0"]
    s.remove(obj("y-0", 3))
    assert names(**{c: "y"}) == ["x-1"]
    s.replace([obj("x-1", 2, **{c: "y"})], "10", scope="")  # x-0 is gone from the list
    assert names(**{c: "x"}) == [] and names(**{c: "y"}) == ["x-1"]
    assert names("elsewhere", **{c: "x"}) == []  # the list covered every namespace
    assert names(**{c: "none"}) == []


def test_reads_go_to_the_api_server_until_the_store_has_listed(monkeypatch):
    calls = []
    monkeypatch.setattr(cache.k, "read_cluster", lambda api, ns, name: calls.append(name) or obj(name, 1))
    store = Store()
    reads = Reads(object(), clusters=store)
    assert reads.cluster("ns", "db")["metadata"]["name"] == "db" and calls == ["db"]
    store.replace([obj("db", 2)], "2")
    assert version(store, "db") == "2" and reads.cluster("ns", "db")["metadata"]["resourceVersion"] == "2"
    assert calls == ["db"]  # from the store now
    assert reads.cluster("ns", "other") is None  # listed, so absent means absent


def test_secrets_are_read_again_when_older_than_allowed_or_written(monkeypatch):
    reads_of = []
    monkeypatch.setattr(cache.k, "read_secret", lambda api, ns, name: reads_of.append(name) or name)
    now = [100.0]
    reads = Reads(object(), cache_secrets=True, clock=lambda: now[0])
    reads.secret("ns", "s", 15)
    reads.secret("ns", "s", 15)
    assert reads_of == ["s"]
    now[0] += 15
    reads.secret("ns", "s", 15)
    assert reads_of == ["s", "s"]
    reads.wrote_secret("ns", "s")
    reads.secret("ns", "s", 15)
    assert reads_of == ["s", "s", "s"]
    created = cache.k.SecretRead({"k": "v"}, (), "7")
    reads.wrote_secret("ns", "new", created)  # the API server's answer to the create
    assert reads.secret("ns", "new", 15) is created and reads_of == ["s", "s", "s"]
    uncached = Reads(object())
    uncached.secret("ns", "t", 15)
    uncached.secret("ns", "t", 15)
    assert reads_of[-2:] == ["t", "t"]


def test_a_pass_woken_by_kopfs_event_reads_at_least_that_version_of_the_pod():
    """kopf's watch and the store's are two: the body kopf delivered goes into the store first, so
    the pass it wakes never computes the status from the store's older copy (a cluster with
    nothing running is not looked at again until its resync)."""
    pods, sets = Store(), Store()
    reads = Reads(object(), pods=pods, statefulsets=sets)
    pods.replace([obj("db-0", 5, app="x")], "5")
    reads.seen_owned("Pod", {**obj("db-0", 7, app="x"), "status": {"phase": "Pending"}})
    assert [p["metadata"]["resourceVersion"] for p in reads.list_pods("ns", {"app": "x"})] == ["7"]
    reads.seen_owned("Pod", obj("db-0", 6, app="x"))  # an older one changes nothing
    assert version(pods, "db-0") == "7"
    reads.seen_owned("StatefulSet", obj("db", 3))
    assert version(sets, "db") == "3" and version(pods, "db") is None


def test_a_copy_an_old_schema_pruned_never_replaces_the_lists_of_the_same_version():
    """A CRD updated while an object is created: the watch open on the old storage delivers it
    pruned, the server closes that watch, the store's LIST reads it whole at the same
    resourceVersion. kopf watches on from that version and keeps its pruned copy, offered before
    every pass: it must not put the pruned copy back."""
    clusters = Store()
    reads = Reads(object(), clusters=clusters)
    pruned = {**obj("db", 8), "spec": {"instances": 1}}
    whole = {**obj("db", 8), "spec": {"instances": 1, "futureSetting": "on"}}
    clusters.offer(pruned, current=False)  # the old storage's watch event
    clusters.replace([whole], "9")  # the LIST after the server closed that watch
    reads.seen(pruned)  # kopf's body, every pass
    clusters.offer(pruned, current=False)  # a late event of the old watch
    assert reads.cluster("ns", "db")["spec"] == whole["spec"]
    reads.seen({**obj("db", 10), "spec": {"instances": 2}})  # an edit: kopf's newer body counts
    assert reads.cluster("ns", "db")["spec"] == {"instances": 2}
    clusters.offer({**obj("db", 10), "spec": {"instances": 2, "futureSetting": "on"}})  # a write's answer
    assert reads.cluster("ns", "db")["spec"]["futureSetting"] == "on"


def test_a_statefulset_generation_this_process_applied_is_known_as_its_own_until_the_cluster_goes(
    monkeypatch,
):
    """A StatefulSet's watch event with the generation this process's apply made asks for no
    apply again; a newer one (a hand edit) does, and so does any generation after a restart (no
    apply seen) or once the cluster was deleted."""
    answers = iter([2, 3])

    def apply(api, body):
        return {**body, "metadata": {**body["metadata"], "generation": next(answers)}}

    monkeypatch.setattr(cache.k, "server_side_apply", apply)
    reads = Reads(object())
    sts = {"kind": "StatefulSet", "metadata": {"namespace": "ns", "name": "db"}}

    def event(generation, name="db"):
        return {
            "kind": "StatefulSet",
            "metadata": {"namespace": "ns", "name": name, "generation": generation},
        }

    assert not reads.applied_here(event(1))  # nothing applied yet: the operator just started
    reads.apply(sts)
    assert reads.applied_here(event(2))
    assert not reads.applied_here(event(3))  # changed after our apply: by hand
    assert not reads.applied_here(event(2, name="other"))
    reads.apply({"kind": "ConfigMap", "metadata": {"namespace": "ns", "name": "db"}})  # not a StatefulSet
    assert reads.applied_here(event(2)) and not reads.applied_here(event(3))
    reads.forget("ns", "db")
    assert not reads.applied_here(event(2))


def test_a_statefulset_event_while_its_apply_is_in_flight_asks_for_no_apply_again(monkeypatch):
    """The watch can deliver the event of the operator's own write before the apply's answer is
    read (a new cluster's StatefulSet, created by that apply): it is that write, or older."""
    reads = Reads(object())
    during = []

    def apply(api, body):
        during.append(reads.applied_here({"metadata": {"namespace": "ns", "name": "db", "generation": 1}}))
        raise ApiException(status=500)

    monkeypatch.setattr(cache.k, "server_side_apply", apply)
    with pytest.raises(ApiException):
        reads.apply({"kind": "StatefulSet", "metadata": {"namespace": "ns", "name": "db"}})
    assert during == [True]
    assert not reads.applied_here({"metadata": {"namespace": "ns", "name": "db", "generation": 1}})
