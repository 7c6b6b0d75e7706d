// The verifier form builder: shows the chosen type's inputs (generated on the server from the engine's
// SpecField definitions), builds the JSON spec live, checks it as the user types through
// POST /api/v1/verifiers/validate, and submits exactly the spec shown (hidden input spec_json).
// The server reads the same inputs without this script (anneal.verifiers.builder.spec_from_inputs).
(function () {
  "use strict";
  var form = document.getElementById("verifier-form");
  if (!form) return;
  var preview = document.getElementById("spec-preview");
  var status = document.getElementById("spec-status");
  var typeSelect = form.elements["type"];
  var timer = null;
  var sequence = 0;

  function csrf() {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function activeFieldset() {
    return form.querySelector('fieldset[data-type="' + typeSelect.value + '"]');
  }

  function testBlocks(text) {
    return text.replace(/\r\n/g, "\n").split(/\n\s*\n/).map(function (block) {
      return block.split("\n").filter(function (line) { return line.trim() !== ""; }).join("\n");
    }).filter(function (block) { return block !== ""; });
  }

  // Mirrors builder.spec_from_inputs: empty inputs are left out so the engine fills its default.
  function spec() {
    var out = { type: typeSelect.value };
    var fieldset = activeFieldset();
    if (!fieldset) return out;
    fieldset.querySelectorAll("[data-spec]").forEach(function (input) {
      var holder = input.closest("[data-show-when]");
      if (holder && holder.hidden) return;  // e.g. the tag to extract while extraction is off
      var name = input.dataset.spec;
      var widget = input.dataset.widget;
      if (widget === "checkbox") { out[name] = input.checked; return; }
      var raw = input.value;
      if (raw.trim() === "") return;
      if (widget === "number") { out[name] = isNaN(Number(raw)) ? raw : Number(raw); }
      else if (widget === "lines") { out[name] = raw.split("\n").map(function (s) { return s.trim(); }).filter(Boolean); }
      else if (widget === "tests") { out[name] = testBlocks(raw); }
      else if (widget === "json") {
        try { out[name] = JSON.parse(raw); } catch (e) { out[name] = raw; out.__json_error = { field: name, message: "is not valid JSON: " + e.message }; }
      }
      else { out[name] = raw; }
    });
    if ((out.type === "python_tests" || out.type === "code_tests") && out.tests) delete out.tests_field;
    return out;
  }

  function clearErrors() {
    form.querySelectorAll("[data-live-error]").forEach(function (p) { p.hidden = true; p.textContent = ""; });
    form.querySelectorAll(".field.has-error[data-field]").forEach(function (d) { d.classList.remove("has-error"); });
  }

  function showError(field, message) {
    var top = field.replace(/^spec\./, "").split(/[.\[]/)[0];
    var holder = activeFieldset() && activeFieldset().querySelector('[data-field="' + top + '"]');
    if (!holder) { status.textContent = field + ": " + message; return; }
    var p = holder.querySelector("[data-live-error]");
    holder.classList.add("has-error");
    p.hidden = false;
    var where = field.replace(/^spec\./, "");
    p.textContent = (where === top ? "" : where + ": ") + message;
  }

  function validate(current) {
    var mine = ++sequence;
    if (current.__json_error) {
      clearErrors();
      showError(current.__json_error.field, current.__json_error.message);
      status.textContent = "Not valid yet.";
      return;
    }
    fetch(form.dataset.validateUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify({ spec: current }),
    }).then(function (response) { return response.json(); }).then(function (body) {
      if (mine !== sequence) return;  // a newer keystroke's answer wins
      clearErrors();
      if (body.ok) {
        status.textContent = "Valid. Saved with defaults filled in:";
        preview.textContent = JSON.stringify(body.spec, null, 2);
      } else {
        status.textContent = "Not valid yet:";
        (body.errors || []).forEach(function (error) { showError(error.field || "spec", error.message); });
      }
    }).catch(function () { status.textContent = "Could not reach the server to check the spec."; });
  }

  // Inputs that matter for one value of another (data-show-when="extract=tag") show only with that value.
  function showDependents() {
    form.querySelectorAll("fieldset[data-type] [data-show-when]").forEach(function (holder) {
      var rule = holder.dataset.showWhen.split("=");
      var control = holder.closest("fieldset").querySelector('[data-spec="' + rule[0] + '"]');
      holder.hidden = !!control && control.value !== rule[1];
    });
  }

  // The chosen dataset's columns, offered by the inputs that name a column (free text still allowed).
  var columnsFrom = document.getElementById("columns-from");
  if (columnsFrom) {
    var columns = JSON.parse(document.getElementById("dataset-columns-data").textContent);
    columnsFrom.addEventListener("change", function () {
      var list = document.getElementById("dataset-columns");
      list.innerHTML = "";
      var names = columns[columnsFrom.value] || [];
      names.forEach(function (column) {
        var option = document.createElement("option");
        option.value = column;
        list.appendChild(option);
      });
      form.querySelectorAll("[data-column-chips]").forEach(function (chips) {
        chips.textContent = "Columns: ";
        names.forEach(function (column) {
          var chip = document.createElement("button");
          chip.type = "button";
          chip.className = "chip";
          chip.dataset.column = column;
          chip.textContent = column;
          chips.appendChild(chip);
        });
      });
    });
  }
  form.addEventListener("click", function (event) {
    var chip = event.target.closest("[data-column]");
    if (!chip) return;
    var input = document.getElementById(chip.parentNode.dataset.columnChips);
    input.value = chip.dataset.column;
    input.dispatchEvent(new Event("input", { bubbles: true }));
  });

  function update() {
    form.querySelectorAll("fieldset[data-type]").forEach(function (fieldset) {
      var active = fieldset.dataset.type === typeSelect.value;
      fieldset.hidden = !active;
      // Hidden types' inputs are not sent: only the chosen type's fields make the spec.
      fieldset.disabled = !active;
    });
    showDependents();
    var current = spec();
    var shown = Object.assign({}, current);
    delete shown.__json_error;
    preview.textContent = JSON.stringify(shown, null, 2);
    clearTimeout(timer);
    timer = setTimeout(function () { validate(current); }, 300);
  }

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", function () {
    var current = spec();
    delete current.__json_error;
    form.elements["spec_json"].value = JSON.stringify(current);
  });
  window.annealVerifierSpec = function () { var s = spec(); delete s.__json_error; return s; };
  update();
})();
