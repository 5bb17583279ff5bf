// turnstile console: refresh a part of the page without reloading it, and copy commands.
// Served by the console itself; the Content-Security-Policy allows no other script.
(function () {
  "use strict";

  function refresh(box) {
    var src = box.getAttribute("data-src");
    var stamp = document.getElementById("refresh-state");
    if (stamp) { stamp.textContent = "refreshing…"; }
    return fetch(src, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        if (stamp) { stamp.textContent = ""; }
      })
      .catch(function (error) {
        if (stamp) { stamp.textContent = "refresh failed (" + error.message + "); the rows shown are older"; }
      });
  }

  function setUpRefresh() {
    var box = document.querySelector("[data-src]");
    if (!box) { return; }
    var auto = document.getElementById("auto-refresh");
    var button = document.getElementById("refresh-now");
    if (button) {
      button.hidden = false;
      button.addEventListener("click", function () { refresh(box); });
    }
    if (auto) {
      auto.parentElement.hidden = false;
      var seconds = parseInt(auto.getAttribute("data-seconds") || "15", 10);
      window.setInterval(function () {
        if (auto.checked && !document.hidden) { refresh(box); }
      }, seconds * 1000);
    }
  }

  function setUpCopy() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-copy]");
      if (!button) { return; }
      var target = document.getElementById(button.getAttribute("data-copy"));
      if (!target) { return; }
      var text = target.textContent;
      var done = function () {
        var label = button.textContent;
        button.textContent = "copied";
        window.setTimeout(function () { button.textContent = label; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { select(target); });
      } else {
        select(target);
      }
    });
  }

  function select(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.addEventListener("DOMContentLoaded", function () {
    setUpRefresh();
    setUpCopy();
  });
})();
