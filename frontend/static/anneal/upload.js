// Dataset uploads in the browser. Both pages work without JavaScript too (a plain form post; a page that
// refreshes itself); with it:
//  - the upload form sends the file with XMLHttpRequest so a progress bar shows the bytes sent;
//  - the upload page polls the upload's API record, moves the ingest progress bar (rows read, % of the file)
//    and reloads once the ingest is finished, so the server renders the final page.
(function () {
  "use strict";

  function uploadForm(form) {
    var mapLater = form.querySelector("input[name=map_later]");
    var quick = document.getElementById("quick-mapping");
    function toggleQuick() { if (quick && mapLater) quick.hidden = mapLater.checked; }
    if (mapLater) { mapLater.addEventListener("change", toggleQuick); toggleQuick(); }

    var box = document.getElementById("upload-progress");
    var bar = document.getElementById("upload-progress-bar");
    var text = document.getElementById("upload-progress-text");
    var button = document.getElementById("upload-submit");

    function showErrors(errors) {
      form.querySelectorAll(".field-error.js").forEach(function (node) { node.remove(); });
      Object.keys(errors).forEach(function (name) {
        var where = document.getElementById("field-" + name) || form;
        errors[name].forEach(function (message) {
          var p = document.createElement("p");
          p.className = "field-error js";
          p.setAttribute("role", "alert");
          p.textContent = message;
          where.appendChild(p);
        });
      });
    }

    form.addEventListener("submit", function (event) {
      if (!window.XMLHttpRequest || !window.FormData) return; // the plain post still works
      event.preventDefault();
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action || window.location.href);
      xhr.setRequestHeader("X-Requested-With", "XMLHttpRequest");
      box.hidden = false;
      button.disabled = true;
      xhr.upload.addEventListener("progress", function (e) {
        if (!e.lengthComputable) return;
        var percent = Math.round((e.loaded / e.total) * 100);
        bar.style.width = percent + "%";
        bar.parentNode.setAttribute("aria-valuenow", String(percent));
        text.textContent = percent + "% of " + (e.total / 1048576).toFixed(1) + " MB sent";
      });
      xhr.addEventListener("load", function () {
        var body = null;
        try { body = JSON.parse(xhr.responseText); } catch (err) { body = null; }
        if (xhr.status === 200 && body && body.redirect) {
          text.textContent = "Uploaded";
          window.location.assign(body.redirect);
          return;
        }
        button.disabled = false;
        box.hidden = true;
        if (body && body.errors) showErrors(body.errors);
        else showErrors({ file: ["The upload failed (HTTP " + xhr.status + "). Try again."] });
      });
      xhr.addEventListener("error", function () {
        button.disabled = false;
        box.hidden = true;
        showErrors({ file: ["The connection broke while sending the file. Try again."] });
      });
      xhr.send(new FormData(form));
    });
  }

  function ingestProgress(box) {
    var url = box.dataset.pollUrl;
    var phase = document.getElementById("upload-phase");
    var bar = document.getElementById("ingest-bar");
    var text = document.getElementById("ingest-text");
    var delay = 1000;
    var finished = ["ready", "failed", "review", "rejected", "mapping"];

    function poll() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (upload) {
          // In "mapping" the page waits until the worker has read the first rows (preview_ready).
          if (finished.indexOf(upload.state) >= 0 && upload.preview_ready !== false) {
            window.location.reload();
            return;
          }
          var phases = { processing: "Validating rows…", mapping: "Reading the first rows…" };
          if (phase) phase.textContent = phases[upload.state] || "Waiting for a worker…";
          var percent = Math.round((upload.progress || 0) * 100);
          if (bar) {
            bar.style.width = percent + "%";
            bar.parentNode.setAttribute("aria-valuenow", String(percent));
          }
          if (text) text.textContent = upload.rows_seen + " rows read · " + percent + "%";
          delay = 1000;
          window.setTimeout(poll, delay);
        })
        .catch(function () {
          // A restart of the web server should not leave the page stuck: keep trying, less often.
          delay = Math.min(delay * 2, 10000);
          window.setTimeout(poll, delay);
        });
    }
    window.setTimeout(poll, delay);
  }

  var form = document.getElementById("upload-form");
  if (form) uploadForm(form);
  var status = document.getElementById("upload-status");
  if (status && status.dataset.finished !== "true") ingestProgress(status);
})();
