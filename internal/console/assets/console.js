// The overview's live updates: new transitions from ATMOST_EVENTS as server-sent events when
// the console reads JetStream, and the counts refreshed, or a refresh every 5 s without it.
// Every page works without this file.
(function () {
  "use strict";
  var body = document.getElementById("overview-body");
  if (!body) return;
  var refreshing = false, pending = false;
  function refresh() {
    if (refreshing) { pending = true; return; }
    refreshing = true;
    fetch("/overview/live", { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html) {
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#overview-body");
        var now = document.getElementById("overview-body");
        if (fresh && now) now.replaceWith(fresh);
      }
    }).catch(function () {}).finally(function () {
      refreshing = false;
      if (pending) { pending = false; setTimeout(refresh, 1000); }
    });
  }
  if (document.body.dataset.live === "sse" && window.EventSource) {
    var list = document.getElementById("live-list");
    var section = document.getElementById("live-events");
    var timer = null;
    var source = new EventSource("/events");
    source.addEventListener("transition", function (ev) {
      var e = JSON.parse(ev.data);
      section.hidden = false;
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = "/intents/" + e.key;
      a.textContent = e.key.slice(0, 16) + "…";
      li.append(e.at + " ", a, " " + e.account + ": " + (e.from || "(new)") + " → " + e.to + " " + e.reason + " by " + e.actor);
      list.prepend(li);
      while (list.children.length > 50) list.lastChild.remove();
      if (!timer) timer = setTimeout(function () { timer = null; refresh(); }, 1500);
    });
    source.onerror = function () { document.getElementById("live-state").textContent = "live stream lost; refreshing every 5 s"; };
    setInterval(refresh, 30000);
  } else {
    setInterval(refresh, 5000);
  }
})();

// The intents page's "select every intent on this page" box: shown only where this script runs.
(function () {
  "use strict";
  var all = document.getElementById("pick-all");
  if (!all) return;
  all.hidden = false;
  all.addEventListener("change", function () {
    document.querySelectorAll('#pick input[name="key"]').forEach(function (box) { box.checked = all.checked; });
  });
})();
