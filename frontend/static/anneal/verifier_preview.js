// The builder's preview panel: rows from a dataset version (or pasted JSONL), completions separated by
// "---" lines, scored by POST /api/v1/verifiers/preview with the spec the form shows right now.
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
          completionsBox.value = rows.map(function (row) { return row.answer !== undefined ? String(row.answer) : ""; }).join("\n---\n");
          errorBox.hidden = true;
        })
        .catch(function () { fail("Could not load rows from that dataset version."); });
    });
  }

  function cell(text) { var td = document.createElement("td"); td.textContent = text; return td; }

  document.getElementById("preview-run").addEventListener("click", function () {
    var lines = rowsBox.value.split("\n").filter(function (line) { return line.trim() !== ""; });
    var rows = [];
    for (var i = 0; i < lines.length; i++) {
      try { rows.push(JSON.parse(lines[i])); } catch (e) { fail("Row " + (i + 1) + " is not JSON: " + e.message); return; }
    }
    var completions = completionsBox.value.split(/\n---\n/);
    if (!rows.length) { fail("Give at least one row."); return; }
    if (completions.length !== rows.length) {
      fail(rows.length + " row(s) but " + completions.length + " completion(s): separate completions with a line '---'.");
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
        tr.appendChild(cell(result.score.toFixed(3)));
        tr.appendChild(cell(Object.keys(result.parts).map(function (k) { return k + "=" + Number(result.parts[k]).toFixed(2); }).join(", ")));
        tr.appendChild(cell(result.reason));
        // python_tests: which test form the row used (asserts, calls or stdin/stdout), so a mixed dataset shows.
        tr.appendChild(cell((result.output && result.output.tests) || ""));
        tbody.appendChild(tr);
      });
      table.hidden = false;
    }).catch(function () { fail("Could not reach the server."); });
  });
})();
