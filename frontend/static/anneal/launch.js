// The launch form: the cost estimate in place (a small fetch; without JavaScript the button submits the form
// and the page comes back with the estimate beside it), and the warnings about max completion length kept
// current as the dataset, the model or the length change.
(function () {
  "use strict";
  var form = document.querySelector("form.launch-form[data-estimate-url]");
  if (!form || !window.fetch || !window.FormData) return;
  var panel = document.getElementById("estimate");
  var summary = document.getElementById("launch-warnings");
  var advanced = document.getElementById("advanced");

  function post() {
    return fetch(form.dataset.estimateUrl, {
      method: "POST",
      body: new FormData(form),
      credentials: "same-origin",
      headers: { "Accept": "application/json" },
    }).then(function (response) {
      if (!response.ok) throw new Error("estimate failed: " + response.status);
      return response.json();
    });
  }

  function showWarnings(body) {
    document.querySelectorAll("[data-warning-for]").forEach(function (node) {
      var text = body.field_warnings[node.dataset.warningFor] || "";
      node.textContent = text;
      node.hidden = !text;
    });
    var list = summary.querySelector("ul");
    list.textContent = "";
    body.warnings.forEach(function (warning) {
      var item = document.createElement("li");
      var text = warning.message.charAt(0).toUpperCase() + warning.message.slice(1);
      item.appendChild(document.createTextNode(text + " "));
      var link = document.createElement("a");
      link.href = "#field-p_max_completion_length";
      link.dataset.openAdvanced = "";
      link.textContent = "Change it";
      item.appendChild(link);
      list.appendChild(item);
    });
    summary.hidden = body.warnings.length === 0;
  }

  form.querySelector("[data-estimate]").addEventListener("click", function (event) {
    event.preventDefault();
    panel.classList.add("loading");
    post().then(function (body) {
      panel.innerHTML = body.html;
      showWarnings(body);
    }).catch(function () {
      form.requestSubmit ? form.requestSubmit(event.target) : form.submit();  // the page's own estimate
    }).finally(function () {
      panel.classList.remove("loading");
    });
  });

  ["dataset_version", "extra_dataset_versions", "p_model", "p_max_completion_length"].forEach(function (name) {
    var input = form.elements[name];
    if (input) input.addEventListener("change", function () { post().then(showWarnings).catch(function () {}); });
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-open-advanced]") && advanced) advanced.open = true;
  });
})();
