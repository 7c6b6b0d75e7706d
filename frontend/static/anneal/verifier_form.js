// The verifier form: show the chosen type's fields and preview the JSON spec as the user types.
// The server builds the same spec from the submitted fields (anneal.verifiers.forms.spec_from).
(function () {
  "use strict";
  var form = document.getElementById("verifier-form");
  if (!form) return;
  var preview = document.getElementById("spec-preview");

  function value(name) {
    var field = form.elements[name];
    if (!field) return "";
    if (field instanceof RadioNodeList) return field.value;
    if (field.type === "checkbox") return field.checked;
    return field.value;
  }

  function testBlocks(text) {
    return text.replace(/\r\n/g, "\n").split(/\n\s*\n/).map(function (block) {
      return block.split("\n").filter(function (line) { return line.trim() !== ""; }).join("\n");
    }).filter(function (block) { return block !== ""; });
  }

  function spec() {
    var type = value("type") || "exact_match";
    if (type === "exact_match") {
      return {
        type: type,
        reference_field: value("reference_field"),
        case_sensitive: value("case_sensitive"),
        strip_whitespace: value("strip_whitespace"),
        extract: value("extract") || "none",
      };
    }
    var out = { type: type };
    if (value("tests_source") === "fixed") out.tests = testBlocks(value("tests"));
    else out.tests_field = value("tests_field");
    out.scoring = value("scoring") || "all_or_nothing";
    var timeout = value("timeout_s");
    if (timeout !== "" && !isNaN(Number(timeout))) out.timeout_s = Number(timeout);
    return out;
  }

  function update() {
    var type = value("type");
    form.querySelectorAll("fieldset[data-type]").forEach(function (fieldset) {
      fieldset.hidden = fieldset.dataset.type !== type;
    });
    var source = value("tests_source") || "field";
    form.querySelectorAll("[data-source]").forEach(function (block) {
      block.hidden = block.dataset.source !== source;
    });
    preview.textContent = JSON.stringify(spec(), null, 2);
  }

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
})();
