// The deployment page: the usage chart (tokens per hour, from the REST API) and a refresh while it changes.
(function () {
  "use strict";
  var dataNode = document.getElementById("deployment-data");
  if (!dataNode) return;
  var page = JSON.parse(dataNode.textContent);
  var CHANGING = ["pending", "starting", "draining"];

  function drawUsage(usage) {
    var node = document.getElementById("usage-chart");
    if (!node || typeof Plotly === "undefined") return;
    var series = usage.series || [];
    if (!series.length) {
      node.innerHTML = '<p class="muted small">The chart fills in as requests arrive.</p>';
      return;
    }
    // Plotly reads "YYYY-MM-DD HH:MM" (no zone suffix) as a date; the buckets are UTC hours.
    var hours = series.map(function (r) { return plainUtc(Date.parse(r.hour)); });
    Plotly.react(node, [
      { type: "bar", name: "tokens in", x: hours, y: series.map(function (r) { return r.prompt_tokens; }) },
      { type: "bar", name: "tokens out", x: hours, y: series.map(function (r) { return r.completion_tokens; }) },
      { type: "scatter", mode: "lines+markers", name: "cost (USD)", yaxis: "y2", x: hours,
        y: series.map(function (r) { return r.cost_usd; }) }
    ], {
      barmode: "stack", height: 260, margin: { l: 50, r: 60, t: 10, b: 40 },
      // Hourly buckets: ticks on whole hours with a date, never Plotly's sub-second guesses around one bar.
      xaxis: hourAxis(hours),
      yaxis: { title: "tokens" }, yaxis2: { title: "USD", overlaying: "y", side: "right", rangemode: "tozero" },
      legend: { orientation: "h" }
    }, { displaylogo: false, responsive: true });
  }

  function plainUtc(ms) { return new Date(ms).toISOString().slice(0, 16).replace("T", " "); }

  function hourAxis(hours) {
    var HOUR = 3600 * 1000;
    var times = hours.map(function (h) { return Date.parse(h.replace(" ", "T") + ":00Z"); });
    var first = Math.min.apply(null, times) - HOUR, last = Math.max.apply(null, times) + HOUR;
    var span = (last - first) / HOUR;
    return {
      type: "date", range: [plainUtc(first), plainUtc(last)], title: "hour (UTC)",
      dtick: span <= 12 ? HOUR : (span <= 48 ? 6 * HOUR : 24 * HOUR),
      tickformat: span <= 48 ? "%H:%M\n%b %d" : "%b %d", hoverformat: "%b %d %H:00"
    };
  }

  function load() {
    fetch(page.usage_url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (usage) { if (usage) drawUsage(usage); })
      .catch(function () {});
  }

  window.addEventListener("load", load);
  // While replicas start or drain the page reloads itself, so the state and the gate's numbers appear.
  if (CHANGING.indexOf(page.state) >= 0) setTimeout(function () { window.location.reload(); }, 3000);
})();
