// Redraws every element with data-refresh="URL" from that URL (an SVG chart) every
// data-every seconds (default 5) while the page is visible.
(function () {
  function refresh(el) {
    if (document.hidden) return;
    fetch(el.dataset.refresh, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) { if (text) el.innerHTML = text; })
      .catch(function () {});
  }
  document.querySelectorAll("[data-refresh]").forEach(function (el) {
    var every = parseFloat(el.dataset.every || "5") * 1000;
    setInterval(function () { refresh(el); }, every);
  });
})();
