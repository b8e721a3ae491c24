// Knooppunt console: the little the pages do with JavaScript. Everything works without it;
// this only checks a subscription form as it is typed (with the API's own validation) and
// refreshes live views. No other script runs (the Content-Security-Policy allows this file
// only).
"use strict";

function encodeForm(form) {
  return new URLSearchParams(new FormData(form)).toString();
}

// A form with data-check-url: after each pause in typing, ask the hub whether it is valid.
function watchCheckedForms() {
  document.querySelectorAll("form[data-check-url]").forEach(function (form) {
    var out = document.getElementById(form.getAttribute("data-check-target"));
    if (!out) return;
    var timer = null;
    var seq = 0;
    function check() {
      var mine = ++seq;
      fetch(form.getAttribute("data-check-url"), {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: encodeForm(form),
        credentials: "same-origin",
      })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          if (mine !== seq) return;
          out.innerHTML = html;
        })
        .catch(function () {});
    }
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(check, 400);
    });
  });
}

// An element with an id and data-refresh="seconds": replaced by the same element of a
// fresh copy of the page, while the page is visible.
function refreshLiveRegions() {
  document.querySelectorAll("[data-refresh][id]").forEach(function (el) {
    var seconds = Math.max(2, parseInt(el.getAttribute("data-refresh"), 10) || 5);
    setInterval(function () {
      if (document.hidden) return;
      fetch(window.location.href, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        })
        .catch(function () {});
    }, seconds * 1000);
  });
}

// A secret shown once: a button copies it whole (the button stays hidden without script).
function offerCopies() {
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var shown = document.getElementById(button.getAttribute("data-copy"));
    if (!shown || !navigator.clipboard) return;
    button.hidden = false;
    var label = button.textContent;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(shown.textContent).then(function () {
        button.textContent = document.documentElement.lang === "nl" ? "Gekopieerd" : "Copied";
        setTimeout(function () { button.textContent = label; }, 2000);
      });
    });
  });
}

document.addEventListener("DOMContentLoaded", function () {
  offerCopies();
  watchCheckedForms();
  refreshLiveRegions();
});
