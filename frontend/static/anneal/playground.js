// The playground: a chat with one deployment, streamed through the platform (server-sent events).
(function () {
  "use strict";
  var page = JSON.parse(document.getElementById("playground-data").textContent);
  var log = document.getElementById("chat-log");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("chat-input");
  var status = document.getElementById("chat-status");
  var send = document.getElementById("chat-send");
  var messages = [];

  function csrf() {
    var field = form.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function bubble(role, text) {
    var node = document.createElement("div");
    node.className = "chat-msg " + role;
    node.textContent = text;
    log.appendChild(node);
    log.scrollTop = log.scrollHeight;
    return node;
  }

  function fail(message, link) {
    var node = bubble("error", message);
    if (link) {
      var a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      node.appendChild(document.createTextNode(" "));
      node.appendChild(a);
    }
    status.textContent = "";
  }

  async function ask() {
    var text = input.value;
    if (!text.trim()) return;
    messages.push({ role: "user", content: text });
    bubble("user", text);
    input.value = "";
    send.disabled = true;
    status.textContent = "generating…";
    var started = performance.now();
    var raw = document.getElementById("chat-raw").checked;
    var body = {
      model: page.model, stream: true,
      max_tokens: parseInt(document.getElementById("chat-max-tokens").value, 10) || 16,
      temperature: parseFloat(document.getElementById("chat-temperature").value) || 0
    };
    if (raw) body.prompt = text; else body.messages = messages;
    try {
      var response = await fetch(page.chat_url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
        body: JSON.stringify(body)
      });
      if (!response.ok) {
        var err = await response.json().catch(function () { return null; });
        messages.pop();
        var quota = err && err.error && err.error.code === "insufficient_quota";
        fail(err && err.error ? err.error.message : "HTTP " + response.status,
          quota ? { href: page.budget_url, text: "Change the monthly cap" } : null);
        return;
      }
      var node = bubble("assistant", "");
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "", answer = "", usage = null;
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        var events = buffer.split("\n\n");
        buffer = events.pop();
        events.forEach(function (event) {
          event.split("\n").forEach(function (line) {
            if (line.indexOf("data:") !== 0) return;
            var data = line.slice(5).trim();
            if (data === "[DONE]") return;
            var payload = JSON.parse(data);
            if (payload.usage) usage = payload.usage;
            (payload.choices || []).forEach(function (choice) {
              var piece = choice.delta ? choice.delta.content : choice.text;
              if (piece) { answer += piece; node.textContent = answer; }
            });
          });
        });
        log.scrollTop = log.scrollHeight;
      }
      if (raw) messages.pop(); else messages.push({ role: "assistant", content: answer });
      var seconds = (performance.now() - started) / 1000;
      status.textContent = usage
        ? usage.prompt_tokens + " tokens in, " + usage.completion_tokens + " out, " +
          (usage.completion_tokens / seconds).toFixed(1) + " tokens/s"
        : "done";
    } catch (e) {
      fail("The connection failed: " + e);
    } finally {
      send.disabled = false;
    }
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); ask(); });
  document.getElementById("chat-clear").addEventListener("click", function () {
    messages = []; log.innerHTML = ""; status.textContent = "";
  });
})();
