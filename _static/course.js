/* A long code name (kvcourse.blocks.block_pool, FreeKVCacheBlockQueue) may break only after a dot,
   an underscore or a slash, never in the middle of a word: this marks those places (<wbr>), and
   course.css stops breaking anywhere else inside tables, where a name would rather scroll. */
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".bd-article code.literal span.pre").forEach(function (span) {
    var text = span.textContent;
    if (text.length < 16 || !/[._\/]/.test(text)) {
      return;
    }
    span.textContent = "";
    text.split(/(?<=[._\/])/).forEach(function (piece, index) {
      if (index > 0) {
        span.appendChild(document.createElement("wbr"));
      }
      span.appendChild(document.createTextNode(piece));
    });
  });
});
