// The job page, live. It holds the last event seq it has applied and (re)connects to ws/jobs/<id>/?after=<seq>,
// so a reconnect gets exactly what it missed: the server replays from the database, then streams. Events are
// applied once each (dedup by seq). Reconnects back off 1 s, 2 s, 4 s … up to 15 s, and stop once the job is
// finished and every event is in.
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("job-data").textContent);
  var TERMINAL = new Set(data.terminal_states);
  var MAX_ROLLOUTS = 200;
  var MAX_LOG = 300;
  var BACKOFF_FIRST_MS = 1000;
  var BACKOFF_MAX_MS = 15000;
  // Close codes the server uses when retrying cannot help (see anneal.training.consumers).
  var CLOSE_REASONS = { 4401: "signed out: reload the page to sign in", 4404: "this job is not visible to you" };

  var $ = function (id) { return document.getElementById(id); };
  var el = {
    conn: $("conn"), connText: $("conn-text"), state: $("job-state"), progress: $("job-progress"),
    progressText: $("progress-text"), error: $("job-error"), errorText: $("job-error-text"),
    cancel: $("cancel-form"), retry: $("retry-form"), chart: $("reward-chart"), rollouts: $("rollouts"),
    rolloutsEmpty: $("rollouts-empty"), rolloutCount: $("rollout-count"), metrics: $("metrics"),
    checkpoints: $("checkpoints"), checkpointsEmpty: $("checkpoints-empty"), log: $("log"),
    metricGroups: $("metric-groups"), metricsEmpty: $("metrics-empty"), metricsStep: $("metrics-step"),
    metricsAll: $("metrics-all"), metricsAllCount: $("metrics-all-count"),
  };

  var job = { state: data.state, step: data.step, maxSteps: data.max_steps };
  var lastSeq = 0;
  var socket = null;
  var delay = BACKOFF_FIRST_MS;
  var caughtUp = false;
  var stopped = false;
  var rolloutTotal = 0;
  var rolloutsSampledOut = 0;
  var hasRollouts = Boolean(data.has_rollouts);

  // ---- connection -------------------------------------------------------------------------------------
  function setConnection(kind, text) {
    el.conn.className = "conn conn-" + kind;
    el.connText.textContent = text || kind;
  }

  function connect() {
    if (stopped) return;
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + window.location.host + data.ws_path + "?after=" + lastSeq;
    caughtUp = false;
    socket = new WebSocket(url);
    socket.onopen = function () { setConnection(lastSeq ? "reconnecting" : "connecting", "catching up"); };
    socket.onmessage = function (message) {
      var msg;
      try { msg = JSON.parse(message.data); } catch (err) { return; }
      if (msg.type === "events") applyFrame(msg);
      else if (msg.type === "replayed") onReplayed();
    };
    socket.onclose = function (event) {
      socket = null;
      if (stopped) return;
      if (CLOSE_REASONS[event.code]) {
        stopped = true;
        setConnection("denied", CLOSE_REASONS[event.code]);
        return;
      }
      scheduleReconnect();
    };
  }

  function scheduleReconnect() {
    setConnection("reconnecting", "reconnecting in " + Math.round(delay / 1000) + " s");
    window.setTimeout(connect, delay);
    delay = Math.min(delay * 2, BACKOFF_MAX_MS);
  }

  function onReplayed() {
    caughtUp = true;
    delay = BACKOFF_FIRST_MS;
    flush();
    if (!maybeStop()) setConnection("live", "live");
  }

  // The terminal state event is a job's last: once it is in and the replay is done, nothing more will come.
  function maybeStop() {
    if (!caughtUp || !TERMINAL.has(job.state)) return false;
    stopped = true;
    setConnection("finished", "finished · all events received");
    if (socket) socket.close(1000);
    return true;
  }

  // ---- events -----------------------------------------------------------------------------------------
  // A frame covers a run of seqs: the events sent plus the rollouts the server sampled out ("skipped"),
  // which stay queryable through the REST API. Either way the page then holds every seq up to the last.
  function applyFrame(frame) {
    (frame.events || []).forEach(applyEvent);
    var skipped = frame.skipped || [];
    if (skipped.length) {
      rolloutsSampledOut += skipped.length;
      lastSeq = Math.max(lastSeq, skipped[skipped.length - 1]);
      renderRolloutCount();
    }
  }

  function applyEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    var p = event.payload || {};
    if (event.kind === "metric") onMetric(p);
    else if (event.kind === "rollout") onRollout(Object.assign({ seq: event.seq }, p));
    else if (event.kind === "state") onState(p, event);
    else if (event.kind === "checkpoint") onCheckpoint(p, event);
    else if (event.kind === "log") addLog(event, logLevel(p.level), p.message || "");
    else if (event.kind === "alarm") onAlarm(p, event);
    // Panels drawn by other scripts (job_length.js) follow the same events.
    document.dispatchEvent(new CustomEvent("anneal:job-event", { detail: event }));
    if (caughtUp) {
      scheduleFlush();
      maybeStop();
    }
  }

  function onState(p, event) {
    job.state = p.state;
    el.state.textContent = p.state;
    el.state.className = "badge state-" + p.state;
    var finished = TERMINAL.has(p.state);
    if (el.cancel) el.cancel.hidden = finished;
    if (el.retry) el.retry.hidden = !finished;
    showLifecycle(p);
    if (p.state === "failed") {
      el.error.hidden = false;
      if (p.error) el.errorText.textContent = p.error;
    }
    var resumed = p.resumed_from_step ? "resumed from step " + p.resumed_from_step : "";
    var why = p.error ? p.error.split("\n")[0] : p.reason || resumed;
    addLog(event, p.state === "failed" ? "error" : "info", "state → " + p.state + (why ? ": " + why : ""), "log-state");
    renderProgress();
    renderEmptyNotes();
  }

  // Pause/resume buttons and why the job paused, stopped or restarted (anneal.training.state).
  function showLifecycle(p) {
    var pause = $("pause-form"), resume = $("resume-form"), box = $("job-reason");
    if (pause) pause.hidden = !(p.state === "queued" || p.state === "running");
    if (resume) resume.hidden = p.state !== "paused";
    if (!box) return;
    if (p.reason) {
      $("job-reason-state").textContent = p.state;
      $("job-reason-text").textContent = p.reason;
      box.hidden = false;
    } else if (p.state === "running" && p.resumed_from_step) {
      $("job-reason-state").textContent = "resumed";
      $("job-reason-text").textContent =
        "attempt " + p.attempt + " goes on from the checkpoint of step " + p.resumed_from_step;
      box.hidden = false;
    } else if (p.state === "running" || TERMINAL.has(p.state)) {
      box.hidden = true;
    }
  }

  function onAlarm(p, event) {
    var li = document.createElement("li");
    var name = document.createElement("code");
    name.textContent = p.name;
    li.append("step " + p.step + " · ", name, " · " + (p.message || ""));
    if (p.name === "reward_tampering") {
      // The offending rollouts, all of them (the live list holds only the newest), one click away.
      var link = document.createElement("a");
      link.href = data.rollouts_url + "?tampering=1&step=" + encodeURIComponent(p.step);
      link.textContent = "show the rollouts of step " + p.step + " that tried to tamper";
      li.append(" · ", link);
    }
    $("alarm-list").append(li);
    $("job-alarms").hidden = false;
    addLog(event, "warning", "alarm " + p.name + ": " + (p.message || ""), "log-alarm");
  }

  // A checkpoint by its step, never where its files lie; writers get a Deploy link with it chosen (the
  // sink adds the checkpoint's id to the event; an older event without one links to the plain form).
  function onCheckpoint(p, event) {
    addLog(event, "info", "checkpoint saved: step " + p.step);
    if (el.checkpoints.querySelector('li[data-step="' + p.step + '"]')) return;
    var li = document.createElement("li");
    li.dataset.step = p.step;
    var name = document.createElement("span");
    name.className = "checkpoint-name";
    name.textContent = "step " + p.step;
    li.append(name);
    if (p.checkpoint) {
      var card = document.createElement("a");
      card.className = "btn btn-small";
      card.href = data.card_url.replace("/0/", "/" + encodeURIComponent(p.checkpoint) + "/");
      card.textContent = "Model card";
      li.append(" ", card);
    }
    if (data.deploy_url) {
      var deploy = document.createElement("a");
      deploy.className = "btn btn-small";
      deploy.href = p.checkpoint ? data.deploy_url + encodeURIComponent(p.checkpoint) : data.deploy_url.split("?")[0];
      deploy.textContent = "Deploy";
      li.append(" ", deploy);
    }
    // Newest first, wherever a replayed or live one lands among those the server drew.
    var after = Array.prototype.find.call(el.checkpoints.children, function (item) { return Number(item.dataset.step) < p.step; });
    el.checkpoints.insertBefore(li, after || null);
    el.checkpointsEmpty.hidden = true;
  }

  // ---- log: one readable line per event (time, level, message) ------------------------------------------
  function logLevel(level) { return level === "warning" || level === "error" ? level : "info"; }

  function clock(iso) {
    var at = iso ? new Date(iso) : null;
    if (!at || isNaN(at.getTime())) return "";
    return at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  }

  function addLog(event, level, text, cls) {
    var li = document.createElement("li");
    li.title = "event #" + event.seq;
    var time = document.createElement("span");
    time.className = "log-time";
    time.textContent = clock(event.created_at);
    var lvl = document.createElement("span");
    lvl.className = "log-level log-level-" + level;
    lvl.textContent = level;
    var t = document.createElement("span");
    if (cls) t.className = cls;
    t.textContent = text;
    li.append(time, lvl, t);
    el.log.prepend(li);
    while (el.log.children.length > MAX_LOG) el.log.lastChild.remove();
  }

  // ---- progress and metrics ---------------------------------------------------------------------------
  function renderProgress() {
    var bar = el.progress.firstElementChild;
    var fraction = job.maxSteps ? Math.min(1, job.step / job.maxSteps) : 0;
    if (job.state === "succeeded") fraction = 1;
    bar.style.width = (fraction * 100).toFixed(1) + "%";
    bar.className = "progress-bar state-" + job.state;
    el.progress.setAttribute("aria-valuenow", job.step);
    el.progressText.textContent = "step " + job.step + " / " + job.maxSteps + eta();
  }

  // Remaining steps times the mean step time of the last few steps; only while the job runs.
  var recentStepTimes = [];
  function eta() {
    if (job.state !== "running" || !recentStepTimes.length || job.step >= job.maxSteps) return "";
    var mean = recentStepTimes.reduce(function (a, b) { return a + b; }, 0) / recentStepTimes.length;
    var seconds = Math.round(mean * (job.maxSteps - job.step));
    var text = seconds >= 3600 ? Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min"
      : seconds >= 60 ? Math.floor(seconds / 60) + " min " + (seconds % 60) + " s" : seconds + " s";
    return " · about " + text + " left";
  }

  var latestMetrics = {};

  function onMetric(p) {
    if (typeof p.step === "number" && p.step > job.step) job.step = p.step;
    if (!Object.keys(latestMetrics).length) renderEmptyNotes();
    if (typeof p.step_time === "number") {
      recentStepTimes.push(p.step_time);
      if (recentStepTimes.length > 20) recentStepTimes.shift();
    }
    Object.keys(p).forEach(function (key) { latestMetrics[key] = p[key]; });
    addPoints(p);
    metricsDirty = true;
  }

  function formatNumber(value) {
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value)) return String(value);
    var abs = Math.abs(value);
    return abs !== 0 && (abs < 1e-3 || abs >= 1e5) ? value.toExponential(2) : value.toFixed(4);
  }

  // As anneal.training.job_page.format_metric.
  function formatValue(value, kind) {
    if (typeof value !== "number") return String(value);
    if (kind === "share") return (value * 100).toFixed(1) + "%";
    if (kind === "seconds") return Math.abs(value) < 100 ? value.toFixed(2) + " s" : value.toFixed(0) + " s";
    if (kind === "count") return Math.round(value).toLocaleString("en-US");
    if (Number.isInteger(value) && Math.abs(value) < 1e6) return String(value);
    var abs = Math.abs(value);
    return abs < 1e-3 || abs >= 1e5 ? value.toExponential(2).replace(/e([+-])(\d)$/, "e$10$2") : value.toFixed(4);
  }

  // The curated groups (data.metric_groups, as anneal.training.job_page.metric_groups reads them), then every
  // raw key behind "Show all metrics".
  var groupSpecs = (data.metric_groups || []).map(function (group) {
    return { title: group.title, rows: group.rows.map(function (row) {
      return Object.assign({ regex: row.pattern ? new RegExp(row.pattern) : null }, row);
    }) };
  });

  function metricGroups(metrics) {
    var placed = {}, keys = Object.keys(metrics).sort();
    return groupSpecs.map(function (group) {
      var rows = [];
      group.rows.forEach(function (row) {
        var found = row.regex ? keys.map(function (key) {
          var match = row.regex.exec(key);
          return match ? [key, row.label.replace("{}", match[1])] : null;
        }).filter(Boolean) : (row.key in metrics ? [[row.key, row.label]] : []);
        found.forEach(function (pair) {
          if (placed[pair[0]]) return;
          placed[pair[0]] = true;
          rows.push({ key: pair[0], label: pair[1], value: formatValue(metrics[pair[0]], row.format) });
        });
      });
      return { title: group.title, rows: rows };
    }).filter(function (group) { return group.rows.length; });
  }

  function pair(term, value, title) {
    var dt = document.createElement("dt");
    dt.textContent = term;
    if (title) dt.title = title;
    var dd = document.createElement("dd");
    dd.textContent = value;
    return [dt, dd];
  }

  function renderMetrics() {
    var keys = Object.keys(latestMetrics).sort();
    if (!keys.length) return;
    var groups = document.createDocumentFragment();
    metricGroups(latestMetrics).forEach(function (group) {
      var head = document.createElement("h3");
      head.className = "metric-group";
      head.textContent = group.title;
      var dl = document.createElement("dl");
      dl.className = "metrics";
      group.rows.forEach(function (row) { dl.append.apply(dl, pair(row.label, row.value, row.key)); });
      groups.append(head, dl);
    });
    el.metricGroups.replaceChildren(groups);
    var raw = document.createDocumentFragment();
    keys.forEach(function (key) { raw.append.apply(raw, pair(key, formatValue(latestMetrics[key], "number"))); });
    el.metrics.replaceChildren(raw);
    el.metricsAllCount.textContent = keys.length;
    el.metricsAll.hidden = false;
    el.metricsEmpty.hidden = true;
    if (typeof latestMetrics.step === "number") el.metricsStep.textContent = "at step " + latestMetrics.step;
  }

  // Why a chart or the metrics are still empty, in the job's state (as anneal.training.job_page says it).
  function emptyMetricsText() {
    if (job.state === "queued") return "No metrics yet: the job is queued.";
    if (job.state === "paused" || job.state === "pausing") return "No metrics yet: the job is paused.";
    if (job.state === "running") {
      return hasRollouts ? "No metrics yet: step " + job.step + " is running; its metrics arrive when it ends."
        : "No metrics yet: the model is loading; the first step's metrics arrive when it ends.";
    }
    return "No metrics: the job ended (" + job.state + ") before its first step finished.";
  }

  function renderEmptyNotes() {
    var text = emptyMetricsText();
    document.querySelectorAll('[data-empty="metrics"]').forEach(function (node) { node.textContent = text; });
    if (!Object.keys(latestMetrics).length) el.metricsEmpty.textContent = text;
  }

  // ---- charts -----------------------------------------------------------------------------------------
  // A line chart draws some metric keys, each as one trace: pick(key) says which trace (and subplot) a key
  // feeds, or null. Points wait in `pending` until a flush draws them: extendTraces adds them to the lines
  // drawn already; a new line needs a full react.
  var metricsDirty = false;
  var baseLayout = {
    margin: { l: 48, r: 16, t: 8, b: 40 },
    legend: { orientation: "h", y: -0.22 },
    hovermode: "x unified",
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { family: "system-ui, sans-serif", size: 12, color: "#1b2230" },
  };
  var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  // floorAtZero: the y axis starts at 0 while every value is 0 or more (Plotly would draw a flat 0 as -1 to
  // 1); a negative value, should one come, lifts the floor with a full redraw.
  function lineChart(node, layout, pick, floorAtZero) {
    var series = [], byKey = {}, pending = {}, plotted = false, needsReact = false, negative = false;
    return {
      add: function (p) {
        if (typeof p.step !== "number") return;
        Object.keys(p).forEach(function (key) {
          if (typeof p[key] !== "number") return;
          if (!byKey[key]) {
            var spec = pick(key);
            if (!spec) return;
            byKey[key] = Object.assign({ key: key, x: [], y: [] }, spec);
            series.push(byKey[key]);
            needsReact = true;
          }
          byKey[key].x.push(p.step);
          byKey[key].y.push(p[key]);
          if (floorAtZero && p[key] < 0 && !negative) { negative = true; needsReact = true; }
          (pending[key] = pending[key] || { x: [], y: [] }).x.push(p.step);
          pending[key].y.push(p[key]);
        });
      },
      draw: function () {
        if (!series.length || !node) return;
        if (!window.Plotly) {
          var note = node.querySelector(".chart-empty");
          if (note) note.textContent = "The chart library did not load (static file vendor/plotly/plotly.min.js).";
          return;
        }
        if (!plotted || needsReact) {
          var traces = series.map(function (s) {
            return Object.assign({ x: s.x.slice(), y: s.y.slice(), type: "scatter", mode: "lines" }, s.trace);
          });
          var empty = node.querySelector(".chart-empty");
          if (empty) empty.remove();
          var full = Object.assign({}, baseLayout, layout);
          if (floorAtZero) {
            full.yaxis = Object.assign({}, full.yaxis, {
              autorangeoptions: Object.assign({}, full.yaxis.autorangeoptions, negative ? {} : { minallowed: 0 }),
            });
          }
          Plotly.react(node, traces, full, config);
          plotted = true;
          needsReact = false;
        } else {
          var indices = [], xs = [], ys = [];
          series.forEach(function (s, index) {
            var points = pending[s.key];
            if (!points || !points.x.length) return;
            indices.push(index);
            xs.push(points.x);
            ys.push(points.y);
          });
          if (indices.length) Plotly.extendTraces(node, { x: xs, y: ys }, indices);
        }
        pending = {};
      },
    };
  }

  var grid = { zeroline: false, gridcolor: "#eef0f3" };
  // Steps run from 0 to the job's last: a chart with one point still reads as "early in the run".
  function stepAxis(extra) {
    return Object.assign({ range: [0, Math.max(1, job.maxSteps)] }, grid, extra || {});
  }
  // Reward: the weighted total with a band of ± one standard deviation across the step's completions, and
  // one line per verifier ("rewards/<name>", or TRL's "rewards/<name>/mean"; their "/std" are skipped).
  var rewardChart = lineChart(
    el.chart,
    {
      xaxis: stepAxis({ title: { text: "step" } }),
      // 0 to 1 at least (a verifier's score), wider only when the rewards are: a flat 0 is not "-1 to 1".
      yaxis: Object.assign({ title: { text: "reward" }, autorangeoptions: { include: [0, 1] } }, grid),
    },
    function (key) {
      if (key === "reward") return { trace: { name: "reward (total)", mode: "lines+markers", line: { width: 3 }, marker: { size: 4 } } };
      if (key === "reward_low") return { trace: { name: "− std", line: { width: 0 }, showlegend: false, hoverinfo: "skip" } };
      if (key === "reward_high") {
        return { trace: { name: "± std", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(255,127,14,0.15)", hoverinfo: "skip" } };
      }
      if (key === "eval/mean") {
        return { trace: { name: "held-out (greedy)", mode: "lines+markers", line: { width: 2, dash: "dash" }, marker: { size: 7, symbol: "diamond" } } };
      }
      var domain = /^reward\/(.+)$/.exec(key);
      if (domain) return { trace: { name: "domain " + domain[1], line: { width: 1.6, dash: "dot" } } };
      var match = /^rewards\/(.+?)(\/mean)?$/.exec(key);
      if (!match || /\/std$/.test(key)) return null;
      return { trace: { name: match[1], line: { width: 1.6 } } };
    },
    true
  );
  // Training signals, one small panel each, in the order they first arrive (KL only exists with a KL
  // penalty): what drifts first when a policy starts to game its verifier.
  var SIGNALS = {
    pass_rate: "pass rate (all verifiers passed)", completion_length: "completion length", entropy: "entropy",
    kl: "KL", step_time: "step time (s)", frac_reward_zero_std: "groups with no signal", grad_norm: "grad norm",
    tampering: "rollouts that tried to tamper (share)",
  };
  function signalTitle(key) {
    if (SIGNALS[key]) return SIGNALS[key];
    var verify = /^verify_time\/(.+)$/.exec(key);
    if (verify) return "verifier time (s): " + verify[1];
    var pass = /^pass_rate\/(.+)$/.exec(key);
    return pass ? "pass rate: " + pass[1] : null;
  }
  var MAX_PANELS = 9;
  var signalLayout = { grid: { rows: 3, columns: 3, pattern: "independent" }, showlegend: false, margin: { l: 40, r: 8, t: 24, b: 28 }, annotations: [] };
  var panels = 0;
  var signalChart = lineChart($("signals-chart"), signalLayout, function (key) {
    var title = signalTitle(key);
    if (!title || panels >= MAX_PANELS) return null;
    panels += 1;
    var n = panels === 1 ? "" : String(panels);
    signalLayout["xaxis" + n] = stepAxis();
    // Shares read from 0 to 1; every other signal (lengths, times, KL, entropy, norms) is never negative.
    var share = /^pass_rate|^frac_reward_zero_std$|^tampering$/.test(key);
    signalLayout["yaxis" + n] = Object.assign({}, grid, share ? { range: [0, 1.05] }
      : { rangemode: "tozero", autorangeoptions: { minallowed: 0 } });
    signalLayout.annotations.push({
      text: title, showarrow: false, xref: "x" + n + " domain", yref: "y" + n + " domain", x: 0, y: 1.12,
      xanchor: "left", font: { size: 11, color: "#5b6473" },
    });
    return { trace: { name: title, xaxis: "x" + n, yaxis: "y" + n, line: { width: 1.6 } } };
  });

  // Multi-domain jobs: each domain's share of the prompts ("domain_weight/<domain>") as the sampler sets it.
  // The card stays hidden for single-domain jobs, which report no such metric.
  var domainNode = $("domain-chart");
  var domainChart = lineChart(
    domainNode,
    {
      xaxis: stepAxis({ title: { text: "step" } }),
      yaxis: Object.assign({ title: { text: "share of prompts" }, range: [0, 1] }, grid),
    },
    function (key) {
      var weight = /^domain_weight\/(.+)$/.exec(key);
      if (!weight) return null;
      var card = domainNode && domainNode.closest("section");
      if (card) card.hidden = false;
      return { trace: { name: weight[1], line: { width: 2 } } };
    }
  );

  var AGENT_HABITS = {
    "eval_agent/tested_before_finish": "ran the tests before finishing",
    "eval_agent/edited_then_tested": "changed the code, then tested and finished",
    "eval_agent/valid_calls": "valid tool calls (share of turns)",
  };
  // Held-out evaluation (gpu_jobs.evaluation): "eval/<domain>" and "eval/mean", scores in [0, 1]. Until the
  // first evaluation the card says why it is empty (the server wrote when it runs, or that there is none).
  var evalChart = lineChart(
    $("eval-chart"),
    {
      xaxis: stepAxis({ title: { text: "step" } }),
      yaxis: Object.assign({ title: { text: "score" }, range: [0, 1.05] }, grid),
    },
    function (key) {
      if (key === "eval/mean") {
        return { trace: { name: "all domains", mode: "lines+markers", line: { width: 3 }, marker: { size: 6 } } };
      }
      var domain = /^eval\/(.+)$/.exec(key);
      if (domain) return { trace: { name: "domain " + domain[1], mode: "lines+markers", line: { width: 1.6, dash: "dot" } } };
      // Agent jobs (gpu_jobs.agent.evaluation): the held-out episodes' habits beside the share solved.
      if (AGENT_HABITS[key]) return { trace: { name: AGENT_HABITS[key], mode: "lines+markers", line: { width: 1.6, dash: "dash" } } };
      return null;
    }
  );

  function addPoints(p) {
    var points = p;
    if (typeof p.reward === "number" && typeof p.reward_std === "number") {
      points = Object.assign({ reward_low: p.reward - p.reward_std, reward_high: p.reward + p.reward_std }, p);
    }
    rewardChart.add(points);
    signalChart.add(p);
    domainChart.add(p);
    evalChart.add(p);
  }

  function drawChart() {
    rewardChart.draw();
    signalChart.draw();
    domainChart.draw();
    evalChart.draw();
  }

  // ---- rollouts ---------------------------------------------------------------------------------------
  var pendingRollouts = [];
  var drewRollouts = false;

  var MAX_HELD = 2000;
  var held = [];  // every rollout received (up to MAX_HELD), for the side-by-side view

  function onRollout(p) {
    rolloutTotal += 1;
    // A step's rollouts arrive before its metrics: the step they belong to is the one in progress.
    if (typeof p.step === "number" && p.step > job.step) job.step = p.step;
    if (!hasRollouts) { hasRollouts = true; renderEmptyNotes(); }
    held.push(p);
    if (held.length > MAX_HELD) held.shift();
    noteChoices(p);
    pendingRollouts.push(p);
    // Only the newest are shown: during a long replay, older ones are dropped before they reach the page.
    if (pendingRollouts.length > MAX_ROLLOUTS) pendingRollouts.shift();
  }

  function rewardClass(reward) {
    if (typeof reward !== "number") return "reward";
    return "reward " + (reward >= 0.999 ? "reward-high" : reward > 0 ? "reward-mid" : "reward-low");
  }

  function block(label, text) {
    var wrap = document.createElement("div");
    var head = document.createElement("div");
    head.className = "io-label";
    head.textContent = label;
    var pre = document.createElement("pre");
    pre.textContent = text == null ? "" : String(text);
    wrap.append(head, pre);
    return wrap;
  }

  // ---- agent episodes: a timeline of turns, each with its plan, tool call and the sandbox's output ------
  function episodeTimeline(p) {
    var wrap = document.createElement("div");
    wrap.className = "episode";
    var facts = document.createElement("p");
    facts.className = "muted small episode-facts";
    facts.textContent = [
      p.task ? "task " + p.task : "",
      p.turns.length + " turn" + (p.turns.length === 1 ? "" : "s"),
      "ended: " + String(p.end_reason || "?").replace("_", " "),
      p.summaries ? p.summaries + " running summar" + (p.summaries === 1 ? "y" : "ies") : "",
      typeof p.sandbox_seconds === "number" ? "sandbox " + p.sandbox_seconds.toFixed(2) + " s" : "",
    ].filter(Boolean).join(" · ");
    var prompt = document.createElement("details");
    prompt.className = "flag";
    var promptHead = document.createElement("summary");
    promptHead.textContent = "task prompt";
    prompt.append(promptHead, block("Prompt", p.prompt));
    var list = document.createElement("ol");
    list.className = "turns";
    p.turns.forEach(function (t) { list.append(turnItem(t)); });
    wrap.append(facts, prompt, list);
    if (p.final_tests) {
      var final = document.createElement("details");
      final.className = "flag sandbox-output";
      var finalHead = document.createElement("summary");
      finalHead.textContent = "final state: the task's tests";
      final.append(finalHead, block("test output", p.final_tests));
      wrap.append(final);
    }
    return wrap;
  }

  function turnItem(t) {
    var li = document.createElement("li");
    li.className = "turn turn-" + (t.status === "ok" ? "ok" : t.status === "error" ? "error" : "failed");
    if (t.summary) {
      var note = document.createElement("p");
      note.className = "muted small turn-summary";
      note.textContent = "Earlier turns were replaced by a running summary here:\n" + t.summary;
      li.append(note);
    }
    var head = document.createElement("div");
    head.className = "turn-head";
    var tool = t.action ? t.action.name : "malformed call";
    head.textContent = ["turn " + t.turn, tool, t.status, t.sandbox_ms ? t.sandbox_ms + " ms" : "",
      t.tokens ? t.tokens + " tokens" : "", t.truncated ? "output cut" : ""].filter(Boolean).join(" · ");
    li.append(head);
    if (t.plan) {
      var plan = document.createElement("p");
      plan.className = "turn-plan";
      plan.textContent = t.plan;
      li.append(plan);
    }
    var call = t.action ? Object.keys(t.action.arguments || {}).map(function (k) {
      return k + ": " + t.action.arguments[k];
    }).join("\n") : (t.error || "") + (t.raw ? "\n\n" + t.raw : "");
    var io = document.createElement("div");
    io.className = "rollout-io";
    io.append(block(t.action ? "Tool call" : "What the model wrote", call || "(no arguments)"),
      block("Sandbox output", t.observation));
    li.append(io);
    return li;
  }

  function rolloutItem(p, fresh) {
    var li = document.createElement("li");
    li.className = "rollout" + (fresh ? " rollout-new" : "");
    li.rollout = p;
    var head = document.createElement("div");
    head.className = "rollout-head";
    var step = document.createElement("span");
    step.className = "rollout-step";
    step.textContent = "step " + p.step;
    var reward = document.createElement("span");
    reward.className = rewardClass(p.reward);
    reward.textContent = typeof p.reward === "number" ? p.reward.toFixed(2) : "–";
    reward.title = "reward";
    var parts = document.createElement("span");
    parts.className = "parts";
    parts.textContent = Object.keys(p.parts || {}).map(function (name) {
      return name + " " + formatNumber(p.parts[name]);
    }).join(" · ");
    head.append(step, reward, parts);
    if (p.held_out) {
      // An agent job's held-out evaluation episode: a task the job never trains on.
      var heldOut = document.createElement("span");
      heldOut.className = "badge held-out";
      heldOut.textContent = "held-out";
      heldOut.title = "an episode of the held-out evaluation, on a task the job never trains on";
      head.append(heldOut);
    }
    var io = document.createElement("div");
    io.className = "rollout-io";
    io.append(block("Prompt", p.prompt), block("Completion", p.completion));
    // An agent episode (gpu_jobs.agent) carries "turns": shown as a timeline instead of one completion.
    li.append(head, Array.isArray(p.turns) ? episodeTimeline(p) : io);
    var why = [p.reason, p.reference ? "reference: " + p.reference : ""].filter(Boolean).join(" · ");
    if (why) {
      var reason = document.createElement("p");
      reason.className = "rollout-reason";
      reason.textContent = why;
      li.append(reason);
    }
    Object.keys(p.output || {}).forEach(function (name) {
      var out = p.output[name];
      var box = document.createElement("details");
      box.className = "flag sandbox-output";
      var summary = document.createElement("summary");
      summary.textContent = "sandbox output of " + name + " (" + (out.status || "?") + ")";
      box.append(summary, block("stdout", out.stdout || "(nothing)"), block("stderr", out.stderr || "(nothing)"));
      // The render verifier's two pictures, as the sandbox rendered them (data: URIs of small PNGs).
      ["answer_png", "reference_png"].forEach(function (key) {
        if (typeof out[key] !== "string" || out[key].indexOf("data:image/png;base64,") !== 0) return;
        var figure = document.createElement("figure");
        figure.className = "rendered";
        var image = document.createElement("img");
        image.src = out[key];
        image.alt = key === "answer_png" ? "the answer, rendered" : "the reference, rendered";
        var caption = document.createElement("figcaption");
        caption.textContent = key === "answer_png" ? "answer" : "reference";
        figure.append(image, caption);
        box.append(figure);
      });
      if (out.answer_png) box.open = true;
      li.append(box);
    });
    if (data.can_write && data.flag_verifiers.length && p.seq && !p.pruned) li.append(flagForm(p));
    return li;
  }

  // ---- flag a rollout: it becomes a test case of one of the job's verifiers ----------------------------
  function csrfToken() {
    var match = /(?:^|; )csrftoken=([^;]+)/.exec(document.cookie);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function flagForm(p) {
    var details = document.createElement("details");
    details.className = "flag";
    var summary = document.createElement("summary");
    summary.textContent = "Flag as a verifier test case";
    var form = document.createElement("form");
    form.className = "filters";
    var verifier = document.createElement("select");
    verifier.name = "verifier";
    data.flag_verifiers.forEach(function (v) { addOption(verifier, v.name); verifier.lastChild.value = v.id; });
    var verdict = document.createElement("select");
    verdict.name = "expected_pass";
    [["false", "should fail (a hack or a wrong answer)"], ["true", "should pass (a right answer)"]].forEach(function (o) {
      var option = document.createElement("option");
      option.value = o[0];
      option.textContent = o[1];
      verdict.append(option);
    });
    var note = document.createElement("input");
    note.name = "note";
    note.placeholder = "why (optional)";
    var button = document.createElement("button");
    button.type = "submit";
    button.className = "btn btn-small";
    button.textContent = "Save test case";
    var status = document.createElement("span");
    status.className = "muted small";
    form.append(verifier, verdict, note, button, status);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      button.disabled = true;
      fetch(data.flag_url + p.seq + "/flag", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify({ verifier: Number(verifier.value), expected_pass: verdict.value === "true", note: note.value }),
      }).then(function (response) {
        return response.json().then(function (body) { return { ok: response.ok, body: body }; });
      }).then(function (result) {
        status.textContent = result.ok ? "saved as test case #" + result.body.id : (result.body.detail || "could not save");
        button.disabled = result.ok;
      }).catch(function () {
        status.textContent = "could not reach the server; try again";
        button.disabled = false;
      });
    });
    details.append(summary, form);
    return details;
  }

  function drawRollouts() {
    if (!pendingRollouts.length) return;
    // Highlight arrivals after the first drawing only: a replayed history is not news.
    var fresh = drewRollouts;
    var fragment = document.createDocumentFragment();
    for (var i = pendingRollouts.length - 1; i >= 0; i--) fragment.append(rolloutItem(pendingRollouts[i], fresh));
    el.rollouts.prepend(fragment);
    while (el.rollouts.children.length > MAX_ROLLOUTS) el.rollouts.lastChild.remove();
    applyFilters();
    pendingRollouts = [];
    drewRollouts = true;
    el.rolloutsEmpty.hidden = true;
    renderRolloutCount();
  }

  // ---- filters and the side-by-side view ------------------------------------------------------------------
  var filterForm = $("rollout-filters");
  var knownParts = {}, knownDomains = {};

  function addOption(select, value) {
    var option = document.createElement("option");
    option.value = option.textContent = value;
    select.append(option);
  }

  function noteChoices(p) {
    Object.keys(p.parts || {}).forEach(function (name) {
      if (!knownParts[name]) { knownParts[name] = true; addOption(filterForm.elements.part, name); }
    });
    if (p.domain && !knownDomains[p.domain]) { knownDomains[p.domain] = true; addOption(filterForm.elements.domain, p.domain); }
  }

  function numberOrNull(input) { return input.value === "" ? null : Number(input.value); }

  function matches(p) {
    var f = filterForm.elements;
    var min = numberOrNull(f.min), max = numberOrNull(f.max);
    if (min !== null && !(p.reward >= min)) return false;
    if (max !== null && !(p.reward <= max)) return false;
    if (f.domain.value && p.domain !== f.domain.value) return false;
    if (f.outcome.value === "tampering") return isTampering(p);
    if (f.outcome.value === "held-out") return Boolean(p.held_out);
    if (f.outcome.value === "training") return !p.held_out;
    if (f.part.value || f.outcome.value) {
      var names = f.part.value ? [f.part.value] : Object.keys(p.parts || {});
      var scores = names.map(function (name) { return (p.parts || {})[name]; }).filter(function (v) { return typeof v === "number"; });
      if (!scores.length) return false;
      if (f.outcome.value === "pass" && !scores.every(function (v) { return v >= 0.999; })) return false;
      if (f.outcome.value === "fail" && !scores.some(function (v) { return v < 0.999; })) return false;
    }
    return true;
  }

  // Tried to tamper with a verifier: the recorder's "tampering" key, or a tampering part or reason.
  function isTampering(p) {
    return Boolean(p.tampering) || (p.parts || {}).tampering >= 1 || /^tampering: /.test(p.reason || "");
  }

  function applyFilters() {
    var shown = 0, items = el.rollouts.children;
    for (var i = 0; i < items.length; i++) {
      items[i].hidden = !matches(items[i].rollout);
      if (!items[i].hidden) shown += 1;
    }
    $("filter-count").textContent = shown === items.length ? "" : shown + " of " + items.length + " shown";
  }
  filterForm.addEventListener("input", applyFilters);
  filterForm.addEventListener("submit", function (event) { event.preventDefault(); });

  var compareForm = $("compare-form");
  function drawCompare() {
    ["a", "b"].forEach(function (side) {
      var step = numberOrNull(compareForm.elements[side]);
      var list = $("compare-" + side);
      var fragment = document.createDocumentFragment();
      held.forEach(function (p) { if (step !== null && p.step === step) fragment.append(rolloutItem(p, false)); });
      list.replaceChildren(fragment);
    });
  }
  compareForm.addEventListener("input", drawCompare);
  compareForm.addEventListener("submit", function (event) { event.preventDefault(); });

  function renderRolloutCount() {
    var text = "newest first · " + rolloutTotal + " received";
    if (rolloutTotal > MAX_ROLLOUTS) text += ", latest " + MAX_ROLLOUTS + " shown";
    if (rolloutsSampledOut) text += " · " + rolloutsSampledOut + " more sampled out of the live feed (all kept: see the API)";
    el.rolloutCount.textContent = text;
  }

  // ---- drawing ----------------------------------------------------------------------------------------
  // Live events are drawn at most once per animation frame; a replay is drawn once, when it ends.
  var flushScheduled = false;

  function scheduleFlush() {
    if (flushScheduled) return;
    flushScheduled = true;
    window.requestAnimationFrame(flush);
  }

  function flush() {
    flushScheduled = false;
    renderProgress();
    if (metricsDirty) { renderMetrics(); metricsDirty = false; }
    drawChart();
    drawRollouts();
  }

  renderProgress();
  setConnection("connecting", "connecting");
  connect();
})();
