// The builder's preview panel: rows from a dataset version, or pasted as a table (a header line, then comma-
// or tab-separated cells, as a spreadsheet copies them) or as JSONL; completions one per line (or blocks
// between "---" lines), or a table's `completion` column. Scored by POST /api/v1/verifiers/preview with the
// spec the form shows right now; each result shows the completion beside its score and reason.
(function () {
  "use strict";
  var form = document.getElementById("verifier-form");
  var panel = document.getElementById("preview-panel");
  if (!form || !panel) return;
  var rowsBox = document.getElementById("preview-rows");
  var completionsBox = document.getElementById("preview-completions");
  var errorBox = document.getElementById("preview-error");
  var table = document.getElementById("preview-results");
  var load = document.getElementById("preview-load");

  function csrf() {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function fail(message) { errorBox.hidden = false; errorBox.textContent = message; table.hidden = true; }

  if (load) {
    load.addEventListener("click", function () {
      var id = document.getElementById("preview-dataset").value;
      if (!id) { fail("Choose a dataset version first, or paste rows."); return; }
      fetch("/api/v1/datasets/versions/" + id + "/rows?limit=5", { credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (body) {
          var rows = body.results || [];
          rowsBox.value = rows.map(function (row) { return JSON.stringify(row); }).join("\n");
          var answers = rows.map(function (row) { return row.answer !== undefined ? String(row.answer) : ""; });
          var multiline = answers.some(function (a) { return a.indexOf("\n") >= 0 || a === ""; });
          completionsBox.value = answers.join(multiline ? "\n---\n" : "\n");
          errorBox.hidden = true;
        })
        .catch(function () { fail("Could not load rows from that dataset version."); });
    });
  }

  function cell(text) { var td = document.createElement("td"); td.textContent = text; return td; }

  // One line of a comma- or tab-separated table; "double quotes" hold separators and "" a quote.
  function cells(line, separator) {
    var out = [], cur = "", quoted = false;
    for (var i = 0; i < line.length; i++) {
      var ch = line[i];
      if (quoted) {
        if (ch === '"' && line[i + 1] === '"') { cur += '"'; i++; }
        else if (ch === '"') quoted = false;
        else cur += ch;
      } else if (ch === '"' && cur === "") quoted = true;
      else if (ch === separator) { out.push(cur); cur = ""; }
      else cur += ch;
    }
    out.push(cur);
    return out;
  }

  // Rows as objects, or a string naming the line that could not be read.
  function parseRows(text) {
    var lines = text.replace(/\r\n/g, "\n").split("\n").filter(function (line) { return line.trim() !== ""; });
    if (!lines.length) return "Give at least one row.";
    var rows = [];
    if (lines[0].trim().charAt(0) === "{") {
      for (var i = 0; i < lines.length; i++) {
        try { rows.push(JSON.parse(lines[i])); } catch (e) { return "Row " + (i + 1) + " is not JSON: " + e.message; }
      }
      return rows;
    }
    var separator = lines[0].indexOf("\t") >= 0 ? "\t" : ",";
    var header = cells(lines[0], separator).map(function (name) { return name.trim(); });
    if (lines.length < 2) return "A table needs its header line (e.g. prompt,answer) and at least one row under it.";
    for (var j = 1; j < lines.length; j++) {
      var values = cells(lines[j], separator);
      if (values.length !== header.length) {
        return "Table line " + (j + 1) + " has " + values.length + " cell(s); the header has " + header.length + " (" + header.join(", ") + ").";
      }
      var row = {};
      header.forEach(function (name, k) { row[name] = values[k]; });
      rows.push(row);
    }
    return rows;
  }

  function parseCompletions(text, count) {
    var normal = text.replace(/\r\n/g, "\n");
    if (/\n---\n/.test(normal)) return normal.split(/\n---\n/);
    var lines = normal.split("\n");
    while (lines.length > count && lines[lines.length - 1].trim() === "") lines.pop();
    return lines;
  }

  document.getElementById("preview-run").addEventListener("click", function () {
    var rows = parseRows(rowsBox.value);
    if (typeof rows === "string") { fail(rows); return; }
    var fromTable = rows.every(function (row) { return typeof row.completion === "string"; }) && !completionsBox.value.trim();
    var completions = fromTable
      ? rows.map(function (row) { return row.completion; })
      : parseCompletions(completionsBox.value, rows.length);
    if (completions.length !== rows.length) {
      fail(rows.length + " row(s) but " + completions.length + " completion(s): give one completion per line " +
        "(or separate answers of several lines with a line '---'), or a 'completion' column in the table.");
      return;
    }
    var samples = rows.map(function (row, index) { return { row: row, completion: completions[index] }; });
    fetch(form.dataset.previewUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify({ spec: window.annealVerifierSpec(), samples: samples }),
    }).then(function (response) {
      return response.json().then(function (body) { return { ok: response.ok, body: body }; });
    }).then(function (answer) {
      if (!answer.ok) { fail(answer.body.detail || "The preview failed."); return; }
      errorBox.hidden = true;
      var tbody = table.querySelector("tbody");
      tbody.innerHTML = "";
      answer.body.results.forEach(function (result, index) {
        var tr = document.createElement("tr");
        tr.appendChild(cell(String(index + 1)));
        var shown = cell(samples[index].completion);
        shown.className = "preview-completion";
        tr.appendChild(shown);
        tr.appendChild(cell(result.score.toFixed(3)));
        tr.appendChild(cell(result.reason));
        tr.appendChild(cell(Object.keys(result.parts).map(function (k) { return k + "=" + Number(result.parts[k]).toFixed(2); }).join(", ")));
        // python_tests: which test form the row used (asserts, calls or stdin/stdout), so a mixed dataset shows.
        tr.appendChild(cell((result.output && result.output.tests) || ""));
        tbody.appendChild(tr);
      });
      table.hidden = false;
    }).catch(function () { fail("Could not reach the server."); });
  });
})();
