// Small progressive enhancements; every page works without them.
(function () {
  "use strict";

  function countLines(textarea) {
    return textarea.value.split("\n").filter(function (l) { return l.trim() !== ""; }).length;
  }

  function bindCounts() {
    document.querySelectorAll("[data-count-for]").forEach(function (badge) {
      var textarea = document.getElementById(badge.dataset.countFor);
      if (!textarea) return;
      var update = function () {
        var n = countLines(textarea);
        badge.textContent = "(" + n + " entr" + (n === 1 ? "y" : "ies") + ")";
      };
      textarea.addEventListener("input", update);
      update();
    });
  }

  function bindConfirms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
  }

  // A box that scrolls (a wide table in its card on a phone, a long JSON value) takes the
  // keyboard's focus while it does, so the arrow keys can scroll it; it is no Tab stop while
  // all it holds is in sight.
  function bindScrollers() {
    var scrolls = function (box) {
      var style = getComputedStyle(box);
      return (style.overflowX !== "visible" && box.scrollWidth > box.clientWidth) ||
        (style.overflowY !== "visible" && box.scrollHeight > box.clientHeight);
    };
    var follow = function (box) {
      if (scrolls(box)) {
        if (!box.hasAttribute("tabindex")) {
          box.setAttribute("tabindex", "0");
          box.dataset.scrollFocus = "";
        }
      } else if ("scrollFocus" in box.dataset) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      }
    };
    var boxes = document.querySelectorAll(".card, pre.json");
    boxes.forEach(follow);
    if (!window.ResizeObserver) return;
    // Again when the screen turns or rows come or go: the box's size changes with them.
    var observer = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) { follow(entry.target); });
    });
    boxes.forEach(function (box) { observer.observe(box); });
  }

  // Live events: pages register handlers by message type on window.graylaneLive.
  // `subscribe(["svc"])` asks for those services' `metrics` messages (docs/api.md), now and
  // after every reconnect.
  var handlers = {};
  var subscribed = [];
  var liveSocket = null;
  function sendSubscription() {
    if (liveSocket && liveSocket.readyState === WebSocket.OPEN && subscribed.length) {
      liveSocket.send(JSON.stringify({ subscribe: subscribed }));
    }
  }
  window.graylaneLive = {
    on: function (type, fn) { (handlers[type] = handlers[type] || []).push(fn); },
    subscribe: function (services) {
      subscribed = services.slice();
      sendSubscription();
    },
  };

  function connectLive(delay) {
    var url = document.body.dataset.liveUrl;
    if (!url || !window.WebSocket) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + url);
    liveSocket = socket;
    // Pages refresh what they show on (re)connect: events sent while no socket was open
    // are not replayed.
    socket.onopen = function () {
      sendSubscription();
      (handlers.open || []).forEach(function (fn) { fn(); });
    };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      (handlers[message.type] || []).forEach(function (fn) { fn(message); });
    };
    socket.onclose = function (event) {
      if (event.code === 4401 || event.code === 4403) return;
      var next = Math.min((delay || 500) * 2, 10000);
      setTimeout(function () { connectLive(next); }, next);
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    bindCounts();
    bindConfirms();
    bindScrollers();
    if (document.querySelector("[data-live]")) connectLive();
  });
})();
