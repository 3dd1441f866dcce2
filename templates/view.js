// amd view: show all tasks, the failed ones or the discordant pairs; the filter lives in the address (#filter=NAME),
// so a link can name one. Without this script every task is shown.
(function () {
  var filters = ["all", "failed", "discordant"];
  var shownCount = document.getElementById("shown");

  function show(filter) {
    var shown = 0;
    var tasks = document.querySelectorAll("section.task");
    document.querySelectorAll("[data-failed]").forEach(function (node) {
      node.hidden = filter !== "all" && node.getAttribute("data-" + filter) !== "true";
    });
    tasks.forEach(function (task) { shown += task.hidden ? 0 : 1; });
    document.querySelectorAll("[data-show]").forEach(function (link) {
      link.setAttribute("aria-pressed", String(link.getAttribute("data-show") === filter));
    });
    document.body.setAttribute("data-filter", filter);
    shownCount.textContent = shown + " of " + tasks.length + " tasks shown";
  }

  function fromAddress() {
    var match = /filter=([a-z]+)/.exec(window.location.hash);
    show(match && filters.indexOf(match[1]) >= 0 ? match[1] : "all");
  }

  window.addEventListener("hashchange", fromAddress);
  fromAddress();
})();
