#include "qtft/infer/detail/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace qtft::infer::detail {
namespace {

constexpr double kLeft = 64, kRight = 16, kTop = 32, kBottom = 44;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgChart::SvgChart(int width, int height, std::string title)
    : width_(width), height_(height), title_(std::move(title)) {}

void SvgChart::include(double x, double y) {
  if (!std::isfinite(x)) return;
  x0_ = has_x_ ? std::min(x0_, x) : x;
  x1_ = has_x_ ? std::max(x1_, x) : x;
  has_x_ = true;
  include_y(y);
}

void SvgChart::include_y(double y) {
  if (!std::isfinite(y)) return;
  y0_ = has_y_ ? std::min(y0_, y) : y;
  y1_ = has_y_ ? std::max(y1_, y) : y;
  has_y_ = true;
}

void SvgChart::x_labels(std::string first, std::string last) {
  x_first_ = std::move(first);
  x_last_ = std::move(last);
}

void SvgChart::y_label(std::string label) { y_label_ = std::move(label); }

double SvgChart::px(double x) const {
  const double span = x1_ > x0_ ? x1_ - x0_ : 1.0;
  return kLeft + (x - x0_) / span * (width_ - kLeft - kRight);
}

double SvgChart::py(double y) const {
  const double span = y1_ > y0_ ? y1_ - y0_ : 1.0;
  return height_ - kBottom - (y - y0_) / span * (height_ - kTop - kBottom);
}

// Every primitive is kept as its points and drawn once the range is known (svg()).
void SvgChart::line(const std::vector<double>& x, const std::vector<double>& y, const std::string& color,
                    const std::string& name, double width, bool dashed) {
  for (size_t i = 0; i < x.size(); ++i) include(x[i], y[i]);
  layers_.push_back("L");
  primitives_.push_back({x, y, {}, color, width, dashed});
  legend_.emplace_back(name, color);
}

void SvgChart::band(const std::vector<double>& x, const std::vector<double>& low, const std::vector<double>& high,
                    const std::string& color, const std::string& name) {
  for (size_t i = 0; i < x.size(); ++i) {
    include(x[i], low[i]);
    include(x[i], high[i]);
  }
  layers_.push_back("B");
  primitives_.push_back({x, low, high, color, 0, false});
  legend_.emplace_back(name, color);
}

void SvgChart::bars(const std::vector<double>& x, const std::vector<double>& y, double bar_width,
                    const std::string& color, const std::string& name) {
  for (size_t i = 0; i < x.size(); ++i) {
    include(x[i] - bar_width / 2, y[i]);
    include(x[i] + bar_width / 2, 0.0);
  }
  layers_.push_back("R");
  primitives_.push_back({x, y, {}, color, bar_width, false});
  legend_.emplace_back(name, color);
}

void SvgChart::horizontal_rule(double y, const std::string& color, const std::string& name) {
  include_y(y);
  layers_.push_back("H");
  primitives_.push_back({{}, {y}, {}, color, 1.0, true});
  legend_.emplace_back(name, color);
}

std::string SvgChart::svg() const {
  std::string out = "<svg class=\"chart\" width=\"" + std::to_string(width_) + "\" height=\"" +
                    std::to_string(height_) + "\" viewBox=\"0 0 " + std::to_string(width_) + " " +
                    std::to_string(height_) + "\" role=\"img\" aria-label=\"" + escape_html(title_) + "\">\n";
  out += "<text x=\"" + number(kLeft) + "\" y=\"18\" class=\"title\">" + escape_html(title_) + "</text>\n";
  const double left = kLeft, right = width_ - kRight, top = kTop, bottom = height_ - kBottom;
  out += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(right - left) + "\" height=\"" +
         number(bottom - top) + "\" fill=\"none\" stroke=\"#999\"/>\n";
  if (has_y_) {
    for (double v : {y0_, (y0_ + y1_) / 2, y1_}) {
      out += "<text x=\"" + number(left - 4) + "\" y=\"" + number(py(v) + 4) + "\" text-anchor=\"end\">" + tick(v) +
             "</text>\n";
    }
    if (y0_ < 0 && y1_ > 0) {
      out += "<line x1=\"" + number(left) + "\" x2=\"" + number(right) + "\" y1=\"" + number(py(0)) + "\" y2=\"" +
             number(py(0)) + "\" stroke=\"#ccc\"/>\n";
    }
  }
  out += "<text x=\"" + number(left) + "\" y=\"" + number(bottom + 16) + "\">" + escape_html(x_first_) + "</text>\n";
  out += "<text x=\"" + number(right) + "\" y=\"" + number(bottom + 16) + "\" text-anchor=\"end\">" +
         escape_html(x_last_) + "</text>\n";
  if (!y_label_.empty()) {
    out += "<text x=\"12\" y=\"" + number((top + bottom) / 2) + "\" transform=\"rotate(-90 12 " +
           number((top + bottom) / 2) + ")\" text-anchor=\"middle\">" + escape_html(y_label_) + "</text>\n";
  }
  for (size_t i = 0; i < primitives_.size(); ++i) {
    const auto& p = primitives_[i];
    const auto& kind = layers_[i];
    if (kind == "L") {
      std::string points;
      for (size_t k = 0; k < p.x.size(); ++k) {
        if (!std::isfinite(p.y[k])) continue;
        points += number(px(p.x[k])) + "," + number(py(p.y[k])) + " ";
      }
      out += "<polyline class=\"series\" fill=\"none\" stroke=\"" + p.color + "\" stroke-width=\"" + number(p.width) +
             "\"" + (p.dashed ? " stroke-dasharray=\"4 3\"" : "") + " points=\"" + points + "\"/>\n";
      // A line of few points shows its points too (one point draws no line at all).
      if (p.x.size() <= 3) {
        for (size_t k = 0; k < p.x.size(); ++k) {
          if (!std::isfinite(p.y[k])) continue;
          out += "<circle cx=\"" + number(px(p.x[k])) + "\" cy=\"" + number(py(p.y[k])) + "\" r=\"3\" fill=\"" +
                 p.color + "\"/>\n";
        }
      }
    } else if (kind == "B") {
      std::string points;
      for (size_t k = 0; k < p.x.size(); ++k) points += number(px(p.x[k])) + "," + number(py(p.y2[k])) + " ";
      for (size_t k = p.x.size(); k-- > 0;) points += number(px(p.x[k])) + "," + number(py(p.y[k])) + " ";
      out += "<polygon class=\"series\" fill=\"" + p.color + "\" fill-opacity=\"0.3\" stroke=\"none\" points=\"" +
             points + "\"/>\n";
    } else if (kind == "R") {
      const double w = std::max(1.0, px(p.width) - px(0));
      for (size_t k = 0; k < p.x.size(); ++k) {
        if (!std::isfinite(p.y[k])) continue;
        const double a = py(std::max(0.0, p.y[k])), b = py(std::min(0.0, p.y[k]));
        out += "<rect class=\"series\" x=\"" + number(px(p.x[k]) - w / 2) + "\" y=\"" + number(a) + "\" width=\"" +
               number(w) + "\" height=\"" + number(std::max(0.5, b - a)) + "\" fill=\"" + p.color + "\"/>\n";
      }
    } else if (kind == "H") {
      out += "<line class=\"series\" x1=\"" + number(left) + "\" x2=\"" + number(right) + "\" y1=\"" +
             number(py(p.y[0])) + "\" y2=\"" + number(py(p.y[0])) + "\" stroke=\"" + p.color +
             "\" stroke-dasharray=\"4 3\"/>\n";
    }
  }
  double lx = right;
  for (auto it = legend_.rbegin(); it != legend_.rend(); ++it) {
    const auto& [name, color] = *it;
    if (name.empty()) continue;  // a line drawn only as context (one of many trials)
    lx -= 14 + 7.0 * static_cast<double>(name.size());
    out += "<rect x=\"" + number(lx) + "\" y=\"10\" width=\"10\" height=\"10\" fill=\"" + color + "\"/><text x=\"" +
           number(lx + 13) + "\" y=\"19\">" + escape_html(name) + "</text>\n";
  }
  return out + "</svg>\n";
}

std::string horizontal_bars_svg(const std::vector<std::pair<std::string, double>>& rows, const std::string& title,
                                const std::string& color) {
  const int row = 18, label = 170, width = 560;
  const int height = 30 + row * static_cast<int>(rows.size()) + 8;
  double max_w = 0;
  for (const auto& [_, w] : rows) max_w = std::max(max_w, w);
  std::string out = "<svg class=\"chart\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
                    "\" role=\"img\" aria-label=\"" + escape_html(title) +
                    "\">\n<text x=\"4\" y=\"18\" class=\"title\">" + escape_html(title) + "</text>\n";
  int y = 30;
  for (const auto& [name, w] : rows) {
    const double bar = max_w > 0 ? w / max_w * (width - label - 60) : 0;
    out += "<text x=\"" + std::to_string(label - 6) + "\" y=\"" + std::to_string(y + 12) + "\" text-anchor=\"end\">" +
           escape_html(name) + "</text><rect class=\"series\" x=\"" + std::to_string(label) + "\" y=\"" +
           std::to_string(y + 2) + "\" width=\"" + number(std::max(0.5, bar)) + "\" height=\"" +
           std::to_string(row - 4) + "\" fill=\"" + color + "\"/><text x=\"" + number(label + bar + 4) + "\" y=\"" +
           std::to_string(y + 12) + "\">" + tick(w) + "</text>\n";
    y += row;
  }
  return out + "</svg>\n";
}

}  // namespace qtft::infer::detail
