// The job page's long-context panels (training/job_length.html): the held-out score by prompt length, base
// model (step 0) against each evaluation, and the length curriculum's stage. The server renders what the
// job's events held at page load (anneal.training.length_results); job.js re-dispatches every event it
// applies as "anneal:job-event", which keeps both panels live.
(function () {
  "use strict";
  var source = document.getElementById("job-length-data");
  if (!source) return;
  var data = JSON.parse(source.textContent);
  var evaluation = data.evaluation;
  var chart = document.getElementById("length-eval-chart");
  var table = document.getElementById("length-eval-table");
  var select = document.getElementById("length-eval-domain");
  var seen = {};
  evaluation.steps.forEach(function (step) { seen[step] = true; });

  function label(bound) { return "\u2264 " + bound; }

  function pct(value) { return value === null || value === undefined ? "–" : (value * 100).toFixed(0) + "%"; }

  var waitingForPlotly = false;

  function draw() {
    if (!chart || !evaluation.bounds.length) return;
    var domain = (select && select.value) || "mean";
    var rows = evaluation.scores[domain] || [];
    var traces = rows.map(function (scores, index) {
      var step = evaluation.steps[index];
      var last = index === rows.length - 1;
      return {
        x: evaluation.bounds.map(label),
        y: scores,
        mode: "lines+markers",
        name: step === 0 ? "base (step 0)" : "step " + step,
        line: { dash: step === 0 ? "dot" : "solid", width: last ? 3 : 1.5 },
        hovertemplate: "%{x} tokens: %{y:.2f}<extra>" + (step === 0 ? "base" : "step " + step) + "</extra>",
      };
    });
    if (!window.Plotly) {
      // This script may run before the page's deferred Plotly (it is included above it): draw again once
      // every script has loaded, instead of leaving the "no evaluation yet" note beside a full table.
      if (!waitingForPlotly) {
        waitingForPlotly = true;
        window.addEventListener("load", function () { waitingForPlotly = false; if (window.Plotly) draw(); });
      }
    } else {
      chart.textContent = "";
      window.Plotly.react(chart, traces, {
        margin: { l: 44, r: 12, t: 8, b: 80 },
        xaxis: { title: { text: "prompt length (tokens)" }, type: "category" },
        yaxis: { title: { text: "score" }, range: [0, 1.05] },
        legend: { orientation: "h", y: -0.32, yanchor: "top" },  // below the axis title, not over it
      }, { displaylogo: false, responsive: true });
    }
    drawTable(domain, rows);
  }

  // The same numbers as text: each bucket's rows, the base score and the latest one, and the change.
  function drawTable(domain, rows) {
    if (!table) return;
    var base = rows[0] || [];
    var latest = rows[rows.length - 1] || [];
    var lastStep = evaluation.steps[evaluation.steps.length - 1];
    var html = "<thead><tr><th>prompt length</th><th>rows</th><th>base</th><th>step " + lastStep +
      "</th><th>change</th></tr></thead><tbody>";
    evaluation.bounds.forEach(function (bound, i) {
      var change = base[i] !== null && base[i] !== undefined && latest[i] !== null && latest[i] !== undefined
        ? ((latest[i] - base[i]) * 100).toFixed(0) + " pts" : "–";
      html += "<tr><td>" + label(bound) + "</td><td>" + (evaluation.rows[i] || 0) + "</td><td>" + pct(base[i]) +
        "</td><td>" + pct(latest[i]) + "</td><td>" + change + "</td></tr>";
    });
    table.innerHTML = html + "</tbody>";
  }

  function onMetric(p) {
    var keys = Object.keys(p).filter(function (k) { return k.indexOf("eval_length/") === 0; });
    if (keys.length && !seen[p.step]) {
      seen[p.step] = true;
      keys.forEach(function (key) {
        var parts = key.split("/");
        var bound = parseInt(parts[1], 10);
        var domain = parts.slice(2).join("/");
        if (evaluation.bounds.indexOf(bound) < 0) {
          evaluation.bounds.push(bound);
          evaluation.bounds.sort(function (a, b) { return a - b; });
        }
        if (evaluation.domains.indexOf(domain) < 0) {
          evaluation.domains.push(domain);
          if (select) {
            var option = document.createElement("option");
            option.value = option.textContent = domain;
            select.appendChild(option);
          }
        }
      });
      evaluation.steps.push(p.step);
      evaluation.rows = evaluation.bounds.map(function (b) { return p["eval_length_rows/" + b] || 0; });
      evaluation.domains.forEach(function (domain) {
        var rows = evaluation.scores[domain] || [];
        evaluation.scores[domain] = rows;
        rows.push(evaluation.bounds.map(function (b) {
          var v = p["eval_length/" + b + "/" + domain];
          return v === undefined ? null : v;
        }));
      });
      draw();
    }
    if (typeof p["curriculum/stage"] === "number") showStage(p["curriculum/stage"]);
  }

  function showStage(stage) {
    var now = document.getElementById("curriculum-now");
    var list = document.getElementById("curriculum-stages");
    if (!now || !list || !data.curriculum || stage < data.curriculum.current) return;
    data.curriculum.current = stage;
    now.textContent = "stage " + stage + " of " + data.curriculum.stages.length;
    Array.prototype.forEach.call(list.children, function (item) {
      var here = Number(item.getAttribute("data-stage")) === stage;
      item.classList.toggle("current", here);
      if (here) item.setAttribute("aria-current", "step"); else item.removeAttribute("aria-current");
    });
  }

  function onLog(p) {
    var move = p.curriculum;
    if (!move || !move.from_stage) return;
    var moves = document.getElementById("curriculum-moves");
    if (moves) {
      var item = document.createElement("li");
      item.textContent = "step " + move.step + ": stage " + move.from_stage + " \u2192 " + move.stage + " (" + move.reason + ")";
      moves.appendChild(item);
    }
    showStage(move.stage);
  }

  document.addEventListener("anneal:job-event", function (e) {
    var event = e.detail || {};
    if (event.kind === "metric") onMetric(event.payload || {});
    else if (event.kind === "log") onLog(event.payload || {});
  });
  if (select) select.addEventListener("change", draw);
  // Plotly loads deferred before this script; draw once the page is parsed.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
