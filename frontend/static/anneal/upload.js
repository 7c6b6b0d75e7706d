// The upload page while the file is validated: poll the upload's API record and reload once it is finished,
// so the server renders the final page (the error table or the new version).
(function () {
  "use strict";
  var box = document.getElementById("upload-status");
  if (!box || box.dataset.finished === "true") return;
  var url = box.dataset.pollUrl;
  var phase = document.getElementById("upload-phase");
  var delay = 1000;

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (upload) {
        if (upload.state === "ready" || upload.state === "failed") {
          window.location.reload();
          return;
        }
        if (phase) phase.textContent = upload.state === "processing" ? "Validating rows…" : "Waiting for a worker…";
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
})();
