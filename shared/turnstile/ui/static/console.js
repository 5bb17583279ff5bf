// turnstile console: refresh a part of the page without reloading it, and copy commands.
// Served by the console itself; the Content-Security-Policy allows no other script.
(function () {
  "use strict";

  var READING_EVERY_MS = 1000;  // while the tables are read (the first reading): fetched again so often
  var reading = null;

  function refresh(box) {
    var src = box.getAttribute("data-src");
    var stamp = document.getElementById("refresh-state");
    if (stamp && !reading) { stamp.textContent = "refreshing…"; }
    return fetch(src, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        if (stamp) { stamp.textContent = ""; }
        whileReading(box);
      })
      .catch(function (error) {
        if (stamp) { stamp.textContent = "refresh failed (" + error.message + "); the rows shown are older"; }
      });
  }

  // A page served while the tables are read says so ([data-reading]): its part is fetched again
  // until the reading is done, then refreshes as usual.
  function whileReading(box) {
    if (reading || !box.querySelector("[data-reading]")) { return; }
    reading = window.setTimeout(function () {
      reading = null;
      refresh(box).then(function () {
        if (!reading && box.querySelector("[data-reading]")) {
          // the fetch failed: try again a little later; the page says the rows are older
          reading = window.setTimeout(function () { reading = null; whileReading(box); }, READING_EVERY_MS * 4);
        }
      });
    }, READING_EVERY_MS);
  }

  function setUpRefresh() {
    var box = document.querySelector("[data-src]");
    if (!box) { return; }
    whileReading(box);
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
