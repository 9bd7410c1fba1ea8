"""List pages of the strict API server: each object once, in key order, across pages,
with objects created and deleted between pages (the kind's sorted keys are kept between
pages until the kind gains or loses one: `ObjectStore.sorted_keys`)."""

from __future__ import annotations

from foresize.shells.kube.api import KubeApi
from foresize.testing.apiserver import ADMIN_TOKEN
from support.kube_objects import namespace, pod

PODS = "/api/v1/pods"


async def _page(api: KubeApi, token: str | None) -> tuple[list[str], str | None, int | None]:
    params = {"limit": "2", **({"continue": token} if token else {})}
    answer = await api.request("GET", PODS, params=params)
    assert answer.code == 200, answer.body
    meta = answer.body["metadata"]
    names = [i["metadata"]["name"] for i in answer.body["items"]]
    return names, meta.get("continue"), meta.get("remainingItemCount")


async def test_pages_follow_the_keys_as_objects_come_and_go(apiserver) -> None:
    apiserver.seed(namespace("shop"))
    for name in ("a", "b", "c", "d", "e"):
        apiserver.seed(pod(name))
    api = KubeApi.from_url(apiserver.url, token=ADMIN_TOKEN)
    try:
        first, token, remaining = await _page(api, None)
        assert first == ["a", "b"] and remaining == 3
        apiserver.seed(pod("aa"))  # before the page's place: not served now
        apiserver.seed(pod("cc"))  # after it: served
        deleted = await api.request("DELETE", "/api/v1/namespaces/shop/pods/d")
        assert deleted.code == 200
        second, token, remaining = await _page(api, token)
        assert second == ["c", "cc"] and remaining == 1
        third, token, remaining = await _page(api, token)
        assert third == ["e"] and token is None and remaining is None
        # A namespace's list, and a selector's, take the same keys filtered.
        shop = await api.request("GET", "/api/v1/namespaces/shop/pods")
        assert [i["metadata"]["name"] for i in shop.body["items"]] == [
            "a", "aa", "b", "c", "cc", "e"
        ]  # fmt: skip
        nothing = await api.request("GET", PODS, params={"labelSelector": "app=none"})
        assert nothing.body["items"] == []
    finally:
        await api.close()
